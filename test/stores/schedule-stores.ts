/**
 * Which stores of STORE_FACTORIES keep schedules: the schedule suites run on
 * every store that has the four optional Store SPI methods and skip the
 * others, saying so in one line. Finding out opens one handle of each
 * store that can run here.
 */
import { hasSchedules } from '../../src/queue/schedules/operations.js';
import { STORE_FACTORIES } from './factories.js';
import type { StoreFactory } from './factories.js';

async function keepsSchedules(f: StoreFactory): Promise<boolean> {
  if (f.skip) return false;
  const h = await f.create();
  try {
    return hasSchedules(await h.open());
  } finally {
    await h.cleanup();
  }
}

const without: string[] = [];
/** Each factory with the reason its schedule suites are skipped, if they are. */
export const SCHEDULE_FACTORIES: Array<{ factory: StoreFactory; skip: string | undefined }> = [];
for (const factory of STORE_FACTORIES) {
  if (factory.skip) {
    SCHEDULE_FACTORIES.push({ factory, skip: factory.skip });
  } else if (await keepsSchedules(factory)) {
    SCHEDULE_FACTORIES.push({ factory, skip: undefined });
  } else {
    without.push(factory.name);
    SCHEDULE_FACTORIES.push({ factory, skip: `${factory.name} does not implement the Store schedule methods` });
  }
}
if (without.length > 0) process.stdout.write(`schedule cases skipped on ${without.join(', ')}: no putSchedule, deleteSchedule, listSchedules, advanceSchedule\n`);
