/**
 * The published package works for a user: `npm pack` a fresh build of the
 * sources, install the tarball for real (registry packages from npm's cache,
 * native modules built by their install scripts) into a new ES-module
 * project with TypeScript set up as README.md says, then compile (strict,
 * module nodenext, library declarations checked) and run README.md's own
 * examples, so the README stays true. Also checks what ships: no test fault
 * injector, no `@internal` declarations, source maps that carry their
 * sources, `require()` refused as the README says, and each entry point
 * exporting the names test/package/exports.ts lists (the ones the docs
 * describe) and no others.
 */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ENTRY_POINTS } from './exports.js';
import { readmeBlocks } from './readme-blocks.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const blocks = readmeBlocks(readme);
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  version: string;
  devDependencies: Record<string, string>;
};

/**
 * The environment of every command: this process's, without what `npm test`
 * and node:test put there about the outer project and run (its package
 * fields, lifecycle, prefix; the test runner's context).
 */
const env = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !/^npm_(package_|lifecycle_|command$|config_local_prefix$)/i.test(k) && k !== 'NODE_TEST_CONTEXT' && k !== 'INIT_CWD'),
);

/** Runs a command, failing the test with its output when it exits non-zero. */
function run(cmd: string, args: string[], opts: SpawnSyncOptions & { cwd: string }): string {
  const res = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, env, ...opts });
  const out = `${res.stdout ?? ''}${res.stderr ?? ''}`;
  const how = res.error ? `failed (${res.error.message})` : `exited ${res.status ?? res.signal}`;
  assert.equal(res.status, 0, `${cmd} ${args.join(' ')} (in ${opts.cwd}) ${how}:\n${out}`);
  return out;
}

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/**
 * Compiling SQLite dominates the install (2 min on an idle 2-core machine,
 * over 7 under load), so better-sqlite3's own install script is handed the
 * binary this checkout's `npm ci` already built for the same version, Node
 * ABI and platform, as a local prebuild: the `prebuild-install` step of its
 * install script unpacks it instead of compiling. Everything else, ferry's
 * own native helper and fs-ext included, builds as a user's install would.
 * `FERRY_PACK_BUILD_SQLITE=1`, or a checkout without that binary, compiles it.
 */
function sqlitePrebuild(dir: string): { env: Record<string, string>; how: string } {
  const lib = join(root, 'node_modules/better-sqlite3');
  const version = (JSON.parse(readFileSync(join(lib, 'package.json'), 'utf8')) as { version: string }).version;
  const binary = join(lib, 'build/Release/better_sqlite3.node');
  if (process.env.FERRY_PACK_BUILD_SQLITE === '1' || !existsSync(binary) || process.platform !== 'linux') return { env: {}, how: 'better-sqlite3 compiled' };
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  mkdirSync(dir, { recursive: true });
  run('tar', ['-czf', join(dir, name), '-C', lib, 'build/Release/better_sqlite3.node'], { cwd: dir });
  return { env: { npm_config_better_sqlite3_local_prebuilds: dir }, how: `better-sqlite3 ${version} from this checkout's build` };
}

describe('the packed package, installed into a new project', { timeout: 20 * 60_000 }, () => {
  let work: string;
  let app: string;
  let installed: string;
  let installOutput = '';

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'ferry-pack-'));
    // Build the current sources in a copy, so the tarball is never a stale
    // dist/. Under FERRY_TEST_DIST=1 (.ci/run, right after `npm run build`
    // in a fresh clone) this checkout's dist/ is that build: pack it.
    let build = root;
    if (process.env.FERRY_TEST_DIST !== '1' || !existsSync(join(root, 'dist/index.js'))) {
      build = join(work, 'build');
      for (const p of ['package.json', 'README.md', 'binding.gyp', 'tsconfig.json', 'tsconfig.build.json', 'src', 'docs', 'native', 'scripts']) {
        cpSync(join(root, p), join(build, p), { recursive: true });
      }
      symlinkSync(join(root, 'node_modules'), join(build, 'node_modules'), 'dir'); // the compiler and @types, for the build only
      run(npm, ['run', 'build', '--silent'], { cwd: build }); // the package's own build script, whatever it runs
    }
    const packed = run(npm, ['pack', '--pack-destination', work, '--json'], { cwd: build });
    const tarball = join(work, (JSON.parse(packed.slice(packed.indexOf('['))) as Array<{ filename: string }>)[0]!.filename);

    app = join(work, 'app');
    cpSync(join(root, 'test/package/fixtures/consumer-types.ts.txt'), join(app, 'consumer-types.ts'));
    // README.md's entries, except that npm names a package installed from a tarball by its `file:` spec, not by `ferry`.
    const allowScripts = { ...blocks.allowScripts, [`file:${tarball}`]: true };
    delete allowScripts[pkg.name];
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'ferry-consumer', private: true, type: 'module', allowScripts }, null, 2));
    const tsconfig = {
      ...blocks.tsconfig,
      compilerOptions: { ...blocks.tsconfig.compilerOptions, outDir: 'out', rootDir: '.', skipLibCheck: false, types: ['node'] },
      include: ['*.ts'],
    };
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    blocks.ts.forEach((code, i) => writeFileSync(join(app, `readme-${i + 1}.ts`), code));
    for (const [name, code] of blocks.js) writeFileSync(join(app, name), code);

    const prebuild = sqlitePrebuild(join(work, 'prebuilds'));
    const started = performance.now();
    installOutput = run(
      npm,
      [
        'install', tarball,
        `typescript@${pkg.devDependencies.typescript}`, `@types/node@${pkg.devDependencies['@types/node']}`,
        '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts=false', '--foreground-scripts=false',
      ],
      { cwd: app, timeout: 15 * 60_000, env: { ...env, ...prebuild.env } },
    );
    installOutput += `\n(install took ${((performance.now() - started) / 1000).toFixed(1)} s; ${prebuild.how})`;
    installed = join(app, 'node_modules', pkg.name);
  });

  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs with the allowScripts README.md lists covering every install script, and builds the native helper', (t) => {
    t.diagnostic(installOutput.trim().split('\n').at(-1)!);
    assert.doesNotMatch(installOutput, /not yet covered by allowScripts/, installOutput);
    assert.deepEqual(Object.keys(blocks.allowScripts).sort(), ['better-sqlite3', 'ferry', 'fs-ext']);
    assert.ok(existsSync(join(installed, 'build/Release/ferry_native.node')), 'the fallocate helper was built');
    assert.ok(existsSync(join(app, 'node_modules/better-sqlite3/build/Release/better_sqlite3.node')), 'better-sqlite3 was built');
  });

  it("compiles README.md's TypeScript examples and the declaration checks with strict, module nodenext and the library's declarations checked", () => {
    assert.equal(String(blocks.tsconfig.compilerOptions.module).toLowerCase(), 'nodenext');
    assert.equal(blocks.tsconfig.compilerOptions.strict, true);
    run(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: app });
  });

  it("runs README.md's examples: the TypeScript ones compiled, the CommonJS one through import()", () => {
    const outputs = blocks.ts.map((_, i) => run(process.execPath, [join('out', `readme-${i + 1}.js`)], { cwd: app }));
    assert.ok(outputs.some((o) => /^handled 1$/m.test(o)), outputs.join('\n'));
    assert.ok(outputs.some((o) => /^handled delivery [0-9a-f-]{36}$/m.test(o)), outputs.join('\n'));
    for (const name of blocks.js.keys()) {
      const out = run(process.execPath, [name], { cwd: app });
      assert.match(out, /^hello from CommonJS$/m);
    }
  });

  it('is ESM-only: require() is refused, as README.md says', () => {
    assert.match(readme, /`require\(\)`\s+fails with `ERR_PACKAGE_PATH_NOT_EXPORTED`/);
    for (const entry of ['ferry', 'ferry/diskqueue', 'ferry/spool', 'ferry/queue']) {
      const res = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(entry)})`], { cwd: app, encoding: 'utf8', env });
      assert.notEqual(res.status, 0, entry);
      assert.match(res.stderr, /ERR_PACKAGE_PATH_NOT_EXPORTED/, entry);
    }
  });

  it('does not ship the test fault injector, and nothing outside the four entry points is importable', () => {
    assert.deepEqual(walk(installed).filter((f) => /faulty/.test(f)), []);
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('ferry/dist/storage/fs.js')"], { cwd: app, encoding: 'utf8', env });
    assert.match(res.stderr, /ERR_PACKAGE_PATH_NOT_EXPORTED/);
  });

  it('exports from each entry point the names test/package/exports.ts lists, and no others', () => {
    const entries = Object.keys(ENTRY_POINTS);
    const script = `for (const e of ${JSON.stringify(entries)}) console.log(JSON.stringify([e, Object.keys(await import(e)).sort()]));`;
    const out = run(process.execPath, ['--input-type=module', '-e', script], { cwd: app });
    const found = Object.fromEntries(out.trim().split('\n').map((l) => JSON.parse(l) as [string, string[]]));
    for (const e of entries) assert.deepEqual(found[e], ENTRY_POINTS[e]!.values, e);
  });

  it("ships every .sql file of the sources beside its compiled module (the stores' statements and numbered migrations)", () => {
    const sqlUnder = (dir: string) => walk(dir).filter((f) => f.endsWith('.sql')).map((f) => relative(dir, f)).sort();
    const sources = sqlUnder(join(root, 'src'));
    assert.ok(sources.some((f) => f.startsWith(join('queue', 'stores', 'clickhouse', 'migrations'))), sources.join('\n'));
    assert.deepEqual(sqlUnder(join(installed, 'dist')), sources);
  });

  it('ships declarations without @internal members', () => {
    const dts = walk(join(installed, 'dist')).filter((f) => f.endsWith('.d.ts'));
    assert.ok(dts.length > 20);
    for (const f of dts) assert.doesNotMatch(readFileSync(f, 'utf8'), /@internal|SubscriptionHost/, f);
  });

  it('ships source maps whose sources are inside the maps', () => {
    const maps = walk(join(installed, 'dist')).filter((f) => f.endsWith('.js.map'));
    assert.ok(maps.length > 20);
    for (const f of maps) {
      const map = JSON.parse(readFileSync(f, 'utf8')) as { sources: string[]; sourcesContent?: Array<string | null> };
      assert.equal(map.sourcesContent?.length, map.sources.length, f);
      assert.ok(map.sourcesContent!.every((s) => typeof s === 'string' && s.length > 0), f);
    }
  });
});
