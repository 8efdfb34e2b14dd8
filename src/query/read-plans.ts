/**
 * Read plans cached by what they are made from: the resource and the request's query string,
 * Range, Prefer and Accept headers and method. A plan depends on nothing else (never on the
 * caller: the scope enters only the statement), so one entry serves every token, and partners
 * repeat the same few queries. Parsing and planning were about 4 % of the service's CPU on the
 * cheap page (CPU profile at 32 connections). A request that fails to parse or plan is not
 * cached: it throws its error anew each time. Plans are read-only, so an entry is shared as is.
 */
import { LRUCache } from 'lru-cache';
import type { Resource } from '../resources/registry.ts';
import { type ReadPlan, planRead } from './plan.ts';
import { type ReadRequestInput, parseReadRequest } from './read-request.ts';

/** Distinct read requests remembered; the least recently used is forgotten first. */
const CACHED_PLANS = 1_000;
/**
 * ... and the characters of their keys together, since a key can be as long as the query string
 * and headers allow: a plan grows with its query string, so this bounds the plans' memory too.
 */
const CACHED_KEY_CHARS = 2_000_000;

const plans = new LRUCache<string, ReadPlan>({ max: CACHED_PLANS, maxSize: CACHED_KEY_CHARS, sizeCalculation: (_plan, key) => key.length });

/** Header values as one string: a repeated Prefer header is its values in order. */
const headerKey = (value: string | readonly string[] | undefined) =>
  value === undefined ? '' : typeof value === 'string' ? `=${value}` : `[${JSON.stringify(value)}`;

export function readPlanOf(resource: Resource, input: ReadRequestInput): ReadPlan {
  const key = `${resource.name}\n${input.method}\n${headerKey(input.rangeHeader)}\n${headerKey(input.preferHeader)}\n${headerKey(input.acceptHeader)}\n${input.queryString}`;
  const cached = plans.get(key);
  if (cached) return cached;
  const plan = planRead(resource, parseReadRequest(input));
  plans.set(key, plan);
  return plan;
}
