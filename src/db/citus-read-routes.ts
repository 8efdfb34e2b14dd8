/**
 * On Citus, the node a partner's read is sent to. Every node of a Citus 11+ cluster holds the
 * cluster's metadata and plans distributed statements itself ("query from any node"); a
 * statement sent to the node that holds its university's shard runs there by Citus's local
 * execution, with no coordinator in between and no second connection. One university's page in
 * the read transaction (pgbench, 32 clients, 100,000 students, the test cluster): 620/s through
 * the coordinator, 1,547/s on the worker holding the shard, 667/s on the other worker; a
 * consortium of three universities on two workers: 191/s through the coordinator, 387/s on the
 * worker holding two of them.
 *
 * A route is only ever a choice of node, never a condition of the answer: row-level security
 * and the transaction's SET LOCAL scope hold on whichever node runs the statement, and a node
 * that no longer holds the shard (after a rebalance) still answers, through Citus, until the
 * route is looked up again (ROUTE_LIFETIME_MS). A read on a node's reader session, whose scope
 * Citus does not carry to another node, is refused there instead and sent again in a
 * transaction (src/db/postgres-store.ts, NODE_READER_ROLE).
 */
import { arrayLiteral } from './array-literal.ts';

/** A node as pg_dist_node names it. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
}

/** Where one of the scope's universities lives; `coordinator` when its node is the coordinator (a single-node cluster). */
export interface Placement extends ClusterNode {
  readonly coordinator: boolean;
}

/**
 * The node of each university: the active primary holding its shard of `tenants`, with which
 * every tenant table is co-located (src/db/migrations/004_sharding.sql).
 */
export const PLACEMENTS_SQL = `select n.nodename as host, n.nodeport as port, n.groupid = 0 as coordinator
  from unnest($1::uuid[]) as u
  join pg_dist_placement p on p.shardid = get_shard_id_for_distribution_column('tenants', u)
  join pg_dist_node n on n.groupid = p.groupid and n.noderole = 'primary' and n.isactive`;

export const placementsParams = (universityIds: readonly string[]) => [arrayLiteral(universityIds)];

/** A rebalance moves shards within minutes; a route older than this is looked up again. */
export const ROUTE_LIFETIME_MS = 60_000;

/**
 * The node holding the most of the placements, on a tie the one named first; null for the
 * coordinator's own sessions: no placements (an empty scope), or most of them on the coordinator.
 */
export function nodeHoldingMost(placements: readonly Placement[]): ClusterNode | null {
  // By node, in the order the placements first name them.
  const held = new Map<string, { node: Placement; count: number }>();
  for (const placement of placements) {
    const key = `${placement.host}:${placement.port}`;
    const entry = held.get(key) ?? { node: placement, count: 0 };
    entry.count += 1;
    held.set(key, entry);
  }
  let most: { node: Placement; count: number } | null = null;
  for (const entry of held.values()) if (!most || entry.count > most.count) most = entry;
  if (!most || most.node.coordinator) return null;
  return { host: most.node.host, port: most.node.port };
}

/** The URL of `node` with everything else (user, password, database, options) as in `url`. */
export function nodeUrl(url: string, node: ClusterNode): string {
  const parsed = new URL(url);
  // A Unix-socket URL names its directory in `host`; a node is reached over TCP.
  parsed.searchParams.delete('host');
  parsed.hostname = node.host.includes(':') ? `[${node.host}]` : node.host;
  parsed.port = String(node.port);
  return parsed.toString();
}

/**
 * Each scope's node, looked up once per ROUTE_LIFETIME_MS. Concurrent reads of a scope share
 * one lookup; a lookup that fails is not kept, so the next read asks again.
 */
export class CitusReadRoutes {
  private readonly routes = new Map<string, { node: Promise<ClusterNode | null>; until: number }>();

  constructor(private readonly lookUp: (universityIds: readonly string[]) => Promise<Placement[]>, private readonly now: () => number = Date.now) {}

  /** `scopeKey` names the scope (its setting's value); the scope's universities are looked up. */
  nodeFor(scopeKey: string, universityIds: readonly string[]): Promise<ClusterNode | null> {
    const known = this.routes.get(scopeKey);
    if (known && known.until > this.now()) return known.node;
    const route = { node: this.lookUp(universityIds).then(nodeHoldingMost), until: this.now() + ROUTE_LIFETIME_MS };
    route.node.catch(() => {
      if (this.routes.get(scopeKey) === route) this.routes.delete(scopeKey);
    });
    this.routes.set(scopeKey, route);
    return route.node;
  }
}
