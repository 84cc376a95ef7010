/**
 * Which stores of STORE_FACTORIES do which part of flow control: the
 * flow-control suites run each part (pause, priority, rate limit) on every
 * store that has it and skip the others, saying so in one line. Finding out
 * opens one handle of each store that can run here; for the rate limit it
 * also makes one limited claim, to see whether the store says how long until
 * the window has room (`ClaimRequest.onRateLimited`, optional).
 */
import { randomUUID } from 'node:crypto';
import type { Store } from '../../src/queue/types.js';
import { STORE_FACTORIES } from './factories.js';
import type { StoreFactory } from './factories.js';

export interface FlowFactory {
  factory: StoreFactory;
  /** Why each part is skipped on this store; undefined where it runs. */
  pause: string | undefined;
  priority: string | undefined;
  rateLimit: string | undefined;
  /** Why the cases needing `onRateLimited` are skipped. */
  rateWait: string | undefined;
}

async function reportsRateWait(s: Store): Promise<boolean> {
  await s.ensureGroup('flow-probe', 'g', 'latest');
  const m = () => ({ id: randomUUID(), topic: 'flow-probe', payload: new Uint8Array(1), publishedAt: new Date() });
  await s.append([m(), m()]);
  let reported = false;
  await s.claim({ topic: 'flow-probe', group: 'g', runnerId: 'probe', max: 2, leaseMs: 60_000, maxInFlight: 0, rateLimit: { max: 1, intervalMs: 3_600_000 }, onRateLimited: () => void (reported = true) });
  return reported;
}

async function probe(factory: StoreFactory): Promise<FlowFactory> {
  if (factory.skip) return { factory, pause: factory.skip, priority: factory.skip, rateLimit: factory.skip, rateWait: factory.skip };
  const h = await factory.create();
  try {
    const s = await h.open();
    const rateLimit = s.capabilities?.rateLimit === true;
    const rateWait = rateLimit && (await reportsRateWait(s));
    return {
      factory,
      pause: s.setGroupPaused ? undefined : `${factory.name} has no setGroupPaused`,
      priority: s.capabilities?.priority === true ? undefined : `${factory.name} does not order by priority (capabilities.priority)`,
      rateLimit: rateLimit ? undefined : `${factory.name} counts no rate limit (capabilities.rateLimit)`,
      rateWait: !rateLimit ? `${factory.name} counts no rate limit` : rateWait ? undefined : `${factory.name} does not say when a rate-limit window has room (onRateLimited)`,
    };
  } finally {
    await h.cleanup();
  }
}

/** Each factory with the reasons its flow-control cases are skipped, if they are. */
export const FLOW_FACTORIES: FlowFactory[] = [];
for (const factory of STORE_FACTORIES) FLOW_FACTORIES.push(await probe(factory));
const skipped = FLOW_FACTORIES.flatMap((f) => (f.factory.skip ? [] : [f.pause, f.priority, f.rateLimit ?? f.rateWait].filter((r) => r !== undefined)));
if (skipped.length > 0) process.stdout.write(`flow-control cases skipped: ${skipped.join('; ')}\n`);
