/** A database of its own on a PostgreSQL server, for one test harness or one benchmark run. */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

export interface ScratchDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

export async function createScratchDatabase(serverUrl: string, name = `pds_test_${randomBytes(6).toString('hex')}`): Promise<ScratchDatabase> {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${name} with (force)`);
  await admin.unsafe(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}
