// The dashboard page. Plain browser JavaScript, no build step. Every value
// from the server is put on the page with textContent (never innerHTML):
// payloads, headers, errors and names are untrusted text.
'use strict';
(() => {
  const meta = (n) => document.querySelector(`meta[name="${n}"]`).content;
  const CSRF = meta('csrf-token');
  const MODE = meta('dashboard-mode');
  const REFRESH_MS = Number(meta('refresh-ms')) || 2000;
  const PAGE = 25;
  const $ = (id) => document.getElementById(id);

  /** Makes an element with text content and attributes; children appended. */
  function el(tag, opts = {}, ...children) {
    const e = document.createElement(tag);
    if (opts.text !== undefined) e.textContent = String(opts.text);
    if (opts.cls) e.className = opts.cls;
    if (opts.title !== undefined) e.title = String(opts.title);
    if (opts.data) for (const [k, v] of Object.entries(opts.data)) e.dataset[k] = String(v);
    for (const c of children) if (c) e.append(c);
    return e;
  }

  function setStatus(text, bad) {
    const s = $('status');
    s.textContent = text;
    s.classList.toggle('bad', !!bad);
  }

  /** Says how an action went; stays until the next action (the status line is rewritten on every refresh). */
  function notice(text, bad) {
    const n = $('notice');
    n.textContent = text;
    n.classList.toggle('bad', !!bad);
  }

  async function getJson(path) {
    const res = await fetch(path, { credentials: 'same-origin', headers: { accept: 'application/json' } });
    const body = await res.json().catch(() => ({ error: res.statusText }));
    if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
    return body;
  }

  async function postJson(path, value) {
    const res = await fetch(path, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': CSRF },
      body: JSON.stringify(value),
    });
    const body = await res.json().catch(() => ({ error: res.statusText }));
    if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
    return body;
  }

  /** Asks in a modal dialog; resolves true when confirmed. */
  function confirmAction(text, okLabel) {
    const d = $('confirm');
    $('confirm-text').textContent = text;
    $('confirm-ok').textContent = okLabel;
    return new Promise((resolve) => {
      d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
      d.returnValue = '';
      d.showModal();
    });
  }

  function age(ms) {
    if (ms === null || ms === undefined) return '—';
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  // ------------------------------------------------------------ groups
  let features = {};

  /**
   * Updates the groups table in place: a group's row (and its buttons)
   * stays the same element from one refresh to the next, so a click is never
   * lost to a row rebuilt under the pointer. Rows of groups that are gone are
   * removed; new ones are added in the server's order.
   */
  function renderGroups(groups) {
    const body = $('groups').tBodies[0];
    const rows = new Map([...body.rows].map((r) => [JSON.stringify([r.dataset.topic, r.dataset.group]), r]));
    const wanted = groups.map((g) => {
      const id = JSON.stringify([g.topic, g.group]);
      const row = rows.get(id) ?? groupRow(g);
      rows.delete(id);
      const cell = (field) => row.querySelector(`td[data-field="${field}"]`);
      cell('pending').textContent = String(g.pending);
      cell('leased').textContent = String(g.leased);
      cell('dead').textContent = String(g.dead);
      cell('dead').className = g.dead > 0 ? 'num warn' : 'num';
      cell('oldest').textContent = age(g.oldestPendingAgeMs);
      cell('state').textContent = g.paused === null ? '—' : g.paused ? 'paused' : 'running';
      cell('state').className = g.paused ? 'warn' : '';
      row.dataset.paused = String(g.paused);
      const button = (action) => row.querySelector(`button[data-action="${action}"]`);
      // Both stay on the page while the store can pause; the one that would change nothing is disabled.
      button('pause').hidden = button('resume').hidden = !features.pause;
      button('pause').disabled = g.paused === true;
      button('resume').disabled = g.paused === false;
      button('remove').hidden = !features.removeGroup;
      return row;
    });
    for (const gone of rows.values()) gone.remove();
    // Appending a row already in the table moves it; rows already in order stay put.
    wanted.forEach((row, i) => {
      if (body.rows[i] !== row) body.insertBefore(row, body.rows[i] ?? null);
    });
    $('no-groups').hidden = groups.length > 0;
  }

  /** A new row for a group; renderGroups fills in its counts and state. */
  function groupRow(g) {
    const button = (text, action, cls, onClick) => {
      const b = el('button', { text, cls, data: { action } });
      b.type = 'button';
      b.addEventListener('click', onClick);
      return b;
    };
    const pause = button('Pause', 'pause', 'small', () => setPaused(g.topic, g.group, true));
    const resume = button('Resume', 'resume', 'small', () => setPaused(g.topic, g.group, false));
    const remove = button('Remove', 'remove', 'danger small', () => removeGroup(g.topic, g.group));
    return el(
      'tr',
      { data: { topic: g.topic, group: g.group } },
      el('td', { text: g.topic, data: { field: 'topic' } }),
      el('td', { text: g.group, data: { field: 'group' } }),
      el('td', { cls: 'num', data: { field: 'pending' } }),
      el('td', { cls: 'num', data: { field: 'leased' } }),
      el('td', { cls: 'num', data: { field: 'dead' } }),
      el('td', { cls: 'num', data: { field: 'oldest' } }),
      el('td', { data: { field: 'state' } }),
      el('td', { cls: 'actions' }, pause, resume, remove),
    );
  }

  /** Pauses or resumes a group for every instance; the answer comes once the server's sample shows it. */
  async function setPaused(topic, group, paused) {
    const verb = paused ? 'pause' : 'resume';
    try {
      await postJson(`/api/${verb}-group`, { topic, group });
      notice(`${paused ? 'paused' : 'resumed'} group ${group} of ${topic}`);
    } catch (err) {
      notice(`${verb} failed: ${err.message}`, true);
    }
    await refresh();
  }

  async function removeGroup(topic, group) {
    const ok = await confirmAction(`Remove group "${group}" from topic "${topic}"? Its pending, leased and dead deliveries are deleted; a running consumer of it stops receiving.`, 'Remove group');
    if (!ok) return;
    try {
      await postJson('/api/remove-group', { topic, group });
      notice(`removed group ${group} from ${topic}`);
      await refresh();
    } catch (err) {
      notice(`remove failed: ${err.message}`, true);
    }
  }

  // ------------------------------------------------------------ chart
  let chart;
  function chartOpts(width) {
    return {
      width,
      height: 260,
      scales: { x: { time: true }, rate: { auto: true, range: (u, min, max) => [0, Math.max(1, max)] }, backlog: { auto: true, range: (u, min, max) => [0, Math.max(1, max)] } },
      series: [
        {},
        { label: 'completed/s', scale: 'rate', stroke: '#2b7a2b', width: 1.5, spanGaps: false },
        { label: 'dead-lettered/s', scale: 'rate', stroke: '#c0392b', width: 1.5, spanGaps: false },
        { label: 'backlog', scale: 'backlog', stroke: '#7f8c8d', dash: [4, 4], width: 1, spanGaps: true },
      ],
      axes: [{}, { scale: 'rate', label: 'per second' }, { scale: 'backlog', side: 1, label: 'backlog', grid: { show: false } }],
    };
  }

  async function refreshChart() {
    const s = await getJson('/api/throughput');
    $('chart-note').textContent =
      s.mode === 'events'
        ? 'Completed and dead-lettered deliveries per second, counted from the queue\u2019s events, and the backlog (pending + leased over every group).'
        : 'Sampled from the group counts: dead-lettered deliveries per second from the rise of the dead counts, completed deliveries per second from the fall of pending + leased less that rise (at least: messages published in the same interval hide as many completions), and the backlog (pending + leased over every group).';
    const data = [s.t, s.completed, s.deadLettered, s.backlog];
    if (!chart) {
      const box = $('chart');
      const opts = chartOpts(Math.max(320, box.clientWidth || 900));
      if (s.mode !== 'events') opts.series[1].label = 'completed/s (at least)';
      chart = new uPlot(opts, data, box);
      window.addEventListener('resize', () => chart.setSize({ width: Math.max(320, box.clientWidth), height: 260 }));
    } else {
      chart.setData(data);
    }
  }

  // ------------------------------------------------------------ dead letters
  const dlq = { topic: null, after: null, stack: [], next: null, selected: new Set() };

  function headerList(headers) {
    const dl = el('dl', { cls: 'headers' });
    for (const [k, v] of Object.entries(headers)) dl.append(el('dt', { text: k }), el('dd', { text: v }));
    return el('details', {}, el('summary', { text: `${Object.keys(headers).length} headers` }), dl);
  }

  function renderDeadLetters(page) {
    const body = $('dead-letters').tBodies[0];
    dlq.selected.clear();
    $('dlq-all').checked = false;
    body.replaceChildren(
      ...page.items.map((m) => {
        const box = el('input');
        box.type = 'checkbox';
        box.setAttribute('aria-label', 'select');
        box.addEventListener('change', () => {
          if (box.checked) dlq.selected.add(m.id);
          else dlq.selected.delete(m.id);
          $('redrive-selected').disabled = dlq.selected.size === 0 || !features.redrive;
        });
        const one = el('button', { text: 'Redrive', cls: 'small' });
        one.type = 'button';
        one.hidden = !features.redrive;
        one.addEventListener('click', () => redrive([m.id], `Redrive message ${m.id} to ${m.sourceTopic ?? 'its source topic'}?`));
        const preview = el('pre', { cls: 'payload', text: m.preview, data: { field: 'payload' } });
        const more = m.bytes > new TextEncoder().encode(m.preview).length ? el('span', { cls: 'muted', text: ` (${m.bytes} bytes)` }) : null;
        return el(
          'tr',
          { data: { id: m.id } },
          el('td', {}, box),
          el('td', { text: m.id, cls: 'mono', data: { field: 'id' } }),
          el('td', { text: `${m.sourceTopic ?? '?'} / ${m.group ?? '?'}`, data: { field: 'source' } }),
          el('td', { text: m.attempts ?? '—', cls: 'num', data: { field: 'attempts' } }),
          el('td', { text: m.lastError ?? '', cls: 'error', data: { field: 'error' } }),
          el('td', {}, preview, more),
          el('td', {}, headerList(m.headers)),
          el('td', {}, one),
        );
      }),
    );
    $('no-dead-letters').hidden = page.items.length > 0;
    dlq.next = page.next;
    $('dlq-next').disabled = !page.next;
    $('dlq-first').disabled = dlq.after === null;
    $('dlq-page-info').textContent = `page ${dlq.stack.length + 1}, ${page.items.length} shown`;
    $('redrive-selected').disabled = true;
    $('redrive-all').hidden = !features.redrive;
    $('redrive-selected').hidden = !features.redrive;
  }

  async function loadDeadLetters() {
    if (!dlq.topic) return;
    const q = new URLSearchParams({ topic: dlq.topic, limit: String(PAGE) });
    if (dlq.after !== null) q.set('after', dlq.after);
    try {
      renderDeadLetters(await getJson(`/api/dead-letters?${q}`));
      $('dlq').hidden = false;
    } catch (err) {
      notice(`dead letters: ${err.message}`, true);
    }
  }

  async function redrive(ids, question) {
    if (!(await confirmAction(question, 'Redrive'))) return;
    try {
      const r = await postJson('/api/redrive', { topic: dlq.topic, ids });
      notice(`redrove ${r.redriven} message(s) from ${dlq.topic}`);
      await Promise.all([loadDeadLetters(), refresh()]);
    } catch (err) {
      notice(`redrive failed: ${err.message}`, true);
    }
  }

  function wireDeadLetters() {
    $('dlq-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const t = $('dlq-topic').value.trim();
      if (!/^[A-Za-z0-9._-]{1,200}$/.test(t)) return notice('a topic name is 1 to 200 characters from A-Z a-z 0-9 . _ -', true);
      Object.assign(dlq, { topic: t, after: null, stack: [], next: null });
      void loadDeadLetters();
    });
    $('dlq-next').addEventListener('click', () => {
      if (!dlq.next) return;
      dlq.stack.push(dlq.after);
      dlq.after = dlq.next;
      void loadDeadLetters();
    });
    $('dlq-first').addEventListener('click', () => {
      Object.assign(dlq, { after: null, stack: [] });
      void loadDeadLetters();
    });
    $('dlq-all').addEventListener('change', (e) => {
      for (const box of $('dead-letters').tBodies[0].querySelectorAll('input[type=checkbox]')) {
        box.checked = e.target.checked;
        box.dispatchEvent(new Event('change'));
      }
    });
    $('redrive-selected').addEventListener('click', () => {
      const ids = [...dlq.selected];
      if (ids.length) void redrive(ids, `Redrive ${ids.length} selected dead letter(s) from ${dlq.topic}?`);
    });
    $('redrive-all').addEventListener('click', () => void redrive('all', `Redrive every dead letter on ${dlq.topic}, not only this page?`));
  }

  function renderTopics(topics) {
    const list = $('dlq-topics');
    list.replaceChildren(...topics.map((t) => Object.assign(el('option'), { value: t })));
    if (!dlq.topic && topics.length) {
      $('dlq-topic').value = topics[0];
      dlq.topic = topics[0];
      void loadDeadLetters();
    }
  }

  // ------------------------------------------------------------ directory
  function kv(table, entries) {
    table.tBodies[0].replaceChildren(...entries.map(([k, v]) => el('tr', { data: { key: k } }, el('th', { text: k }), el('td', { text: v, cls: 'num', data: { field: k } }))));
  }

  function renderDir(v) {
    $('dir-title').textContent = `${v.format === 'spool' ? 'Spool' : 'DiskQueue'} ${v.dir}`;
    const state = v.locked ? `locked: ${v.error}` : v.error ? `partly unreadable: ${v.error}` : v.verify && !v.verify.ok ? 'DAMAGED' : 'ok';
    $('dir-state').textContent = `${state} · checked ${new Date(v.at).toLocaleTimeString()}`;
    $('dir-state').className = v.locked || v.error || (v.verify && !v.verify.ok) ? 'warn' : '';
    kv($('dir-stats'), Object.entries(v.stats ?? {}));
    const r = v.verify;
    kv($('dir-verify'), r ? Object.entries(r).filter(([, x]) => typeof x !== 'object') : []);
    $('dir-damage').replaceChildren(
      ...(r?.damage ?? []).map((d) => el('li', { text: `segment ${d.segment} at byte ${d.position}: ${d.reason}${d.lostRecords !== undefined ? `, ${d.lostRecords} records` : ''}${d.lostBytes !== undefined ? `, ${d.lostBytes} bytes` : ''}` })),
    );
  }

  // ------------------------------------------------------------ refresh loop
  async function refresh() {
    try {
      const o = await getJson('/api/overview');
      if (o.mode === 'queue') {
        features = o.features || {};
        renderGroups(o.groups);
        renderTopics(o.deadLetterTopics);
      } else if (o.dir) {
        renderDir(o.dir);
      }
      const when = o.at ? new Date(o.at).toLocaleTimeString() : '—';
      setStatus(o.error ? `last sample failed: ${o.error}` : `updated ${when}`, !!o.error);
    } catch (err) {
      setStatus(`cannot reach the dashboard: ${err.message}`, true);
    }
  }

  async function tick() {
    await refresh();
    if (MODE === 'queue') await refreshChart().catch((err) => setStatus(`chart: ${err.message}`, true));
  }

  $('queue-view').hidden = MODE !== 'queue';
  $('dir-view').hidden = MODE !== 'dir';
  if (MODE === 'queue') wireDeadLetters();
  // The next refresh is scheduled when this one ends, so a slow server or a
  // busy browser never has refreshes piling up on each other.
  (async function loop() {
    await tick();
    setTimeout(loop, REFRESH_MS);
  })();
})();
