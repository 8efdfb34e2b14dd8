/**
 * How a partner read on Citus chooses its node (src/db/citus-read-routes.ts): the node holding
 * most of the scope's universities, the coordinator when there is none, a route kept for its
 * lifetime and shared by concurrent reads, a failed lookup forgotten. On the real cluster, in
 * test/citus.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CitusReadRoutes, type Placement, ROUTE_LIFETIME_MS, nodeHoldingMost, nodeUrl } from '../src/db/citus-read-routes.ts';

const worker = (port: number): Placement => ({ host: '10.0.0.1', port, coordinator: false });
const coordinator: Placement = { host: '10.0.0.9', port: 5432, coordinator: true };

describe('nodeHoldingMost', () => {
  test('the node holding most of the placements, the first of them on a tie', () => {
    assert.deepEqual(nodeHoldingMost([worker(1), worker(2), worker(2)]), { host: '10.0.0.1', port: 2 });
    assert.deepEqual(nodeHoldingMost([worker(1), worker(2)]), { host: '10.0.0.1', port: 1 });
    assert.deepEqual(nodeHoldingMost([worker(2), worker(1), worker(1), worker(2)]), { host: '10.0.0.1', port: 2 });
  });

  test('none for an empty scope, or when most are on the coordinator', () => {
    assert.equal(nodeHoldingMost([]), null);
    assert.equal(nodeHoldingMost([coordinator, worker(1), coordinator]), null);
    assert.deepEqual(nodeHoldingMost([coordinator, worker(1), worker(1)]), { host: '10.0.0.1', port: 1 });
  });
});

describe('nodeUrl', () => {
  test('the node\'s host and port with the user, password, database and options of the URL', () => {
    assert.equal(nodeUrl('postgres://app:s%40cret@coordinator:5432/pds?sslmode=require', { host: 'worker-1', port: 6432 }),
      'postgres://app:s%40cret@worker-1:6432/pds?sslmode=require');
  });

  test('an IPv6 node in brackets; a Unix-socket directory dropped, since nodes are reached over TCP', () => {
    assert.equal(nodeUrl('postgres://app@localhost/pds?host=/var/run/postgresql', { host: 'fd00::2', port: 5432 }), 'postgres://app@[fd00::2]:5432/pds');
  });
});

describe('CitusReadRoutes', () => {
  const routesOver = (placements: Placement[]) => {
    const lookups: string[][] = [];
    let now = 0;
    const routes = new CitusReadRoutes(async (ids) => {
      lookups.push([...ids]);
      return placements;
    }, () => now);
    return { routes, lookups, advance: (ms: number) => { now += ms; } };
  };

  test('a scope is looked up once for concurrent reads and kept for its lifetime, then looked up again', async () => {
    const { routes, lookups, advance } = routesOver([worker(7)]);
    const nodes = await Promise.all([routes.nodeFor('a', ['a']), routes.nodeFor('a', ['a'])]);
    assert.deepEqual(nodes, [{ host: '10.0.0.1', port: 7 }, { host: '10.0.0.1', port: 7 }]);
    advance(ROUTE_LIFETIME_MS - 1);
    await routes.nodeFor('a', ['a']);
    assert.equal(lookups.length, 1);
    advance(1);
    await routes.nodeFor('a', ['a']);
    assert.equal(lookups.length, 2);
  });

  test('each scope has its own route', async () => {
    const { routes, lookups } = routesOver([worker(7)]);
    await routes.nodeFor('a', ['a']);
    await routes.nodeFor('a,b', ['a', 'b']);
    assert.deepEqual(lookups, [['a'], ['a', 'b']]);
  });

  test('a failed lookup fails its reads and is not kept', async () => {
    let fail = true;
    const routes = new CitusReadRoutes(async () => {
      if (fail) throw new Error('coordinator down');
      return [worker(3)];
    });
    await assert.rejects(routes.nodeFor('a', ['a']), /coordinator down/);
    fail = false;
    assert.deepEqual(await routes.nodeFor('a', ['a']), { host: '10.0.0.1', port: 3 });
  });
});
