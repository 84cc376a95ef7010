/** The job-queue systems of the Postgres workloads, in the order each round runs them. */
import { bullmq } from './bullmq.js';
import { ferryNats, ferryNatsCluster } from './ferry-nats.js';
import { ferryPostgres } from './ferry-postgres.js';
import { graphileWorker } from './graphile-worker.js';
import type { JobSystem } from './job-system.js';
import { pgBoss } from './pg-boss.js';

export const JOB_SYSTEMS: JobSystem[] = [ferryPostgres, ferryNats, ferryNatsCluster, pgBoss, graphileWorker, bullmq];

export function jobSystem(name: string): JobSystem {
  const s = JOB_SYSTEMS.find((x) => x.name === name);
  if (!s) throw new Error(`unknown job system ${name}`);
  return s;
}

let namespaces = 0;
/** A fresh schema / key prefix for one round of one system. */
export function freshNamespace(system: JobSystem, tag: string): string {
  const slug = system.name.toLowerCase().replace(/[^a-z0-9]+/g, '_');
  return `peers_${slug}_${tag}_${process.pid}_${++namespaces}`;
}
