/**
 * The syntax tree of a read request, as parsed from the query string (src/query/query-params.ts)
 * and the Range and Prefer headers (range.ts, preferences.ts), with the Accept header as sent.
 */

export interface JsonStep {
  readonly arrow: '->' | '->>';
  readonly key: string;
  readonly isIndex: boolean;
}

export interface FieldRef {
  readonly name: string;
  readonly jsonPath: readonly JsonStep[];
}

export const quantifiableOperators = ['eq', 'gt', 'gte', 'lt', 'lte', 'like', 'ilike', 'match', 'imatch'] as const;
export const simpleOperators = ['neq', 'cs', 'cd', 'ov', 'sl', 'sr', 'nxr', 'nxl', 'adj', 'isdistinct'] as const;
export const ftsOperators = ['fts', 'plfts', 'phfts', 'wfts'] as const;
export const isValues = ['null', 'not_null', 'true', 'false', 'unknown'] as const;

export type QuantifiableOperator = (typeof quantifiableOperators)[number];
export type SimpleOperator = (typeof simpleOperators)[number];
export type FtsOperator = (typeof ftsOperators)[number];
export type IsValue = (typeof isValues)[number];
export type ComparisonOperator = QuantifiableOperator | SimpleOperator;

export type Operation =
  | { readonly kind: 'compare'; readonly op: ComparisonOperator; readonly quantifier: 'any' | 'all' | null; readonly value: string }
  | { readonly kind: 'in'; readonly values: readonly string[] }
  | { readonly kind: 'is'; readonly value: IsValue }
  | { readonly kind: 'fts'; readonly op: FtsOperator; readonly language: string | null; readonly value: string };

export interface Filter {
  readonly kind: 'filter';
  readonly field: FieldRef;
  readonly negated: boolean;
  readonly operation: Operation;
}

export interface LogicTree {
  readonly kind: 'tree';
  readonly op: 'and' | 'or';
  readonly negated: boolean;
  readonly children: readonly Condition[];
}

export type Condition = Filter | LogicTree;

export type SelectItem =
  | { readonly kind: 'star' }
  | { readonly kind: 'field'; readonly alias: string | null; readonly field: FieldRef; readonly cast: string | null };

export interface OrderTerm {
  readonly field: FieldRef;
  readonly direction: 'asc' | 'desc' | null;
  readonly nulls: 'first' | 'last' | null;
}

/** A condition, order or limit addressed to an embedded resource (`x.order`, `x.col=eq.1`). */
export interface EmbedReference {
  readonly path: readonly string[];
  readonly parameter: string;
}

export type CountPreference = 'exact' | 'planned' | 'estimated';

export interface ReadSyntax {
  readonly select: readonly SelectItem[];
  readonly conditions: readonly Condition[];
  readonly order: readonly OrderTerm[];
  /** Exact: PostgreSQL takes up to 2^63 − 1, beyond what a number holds (2^53). */
  readonly limit: bigint | null;
  readonly offset: bigint | null;
  readonly embedReferences: readonly EmbedReference[];
  /** `Range: first-last` or `first-` (last null); null when absent or not of those forms. */
  readonly rangeHeader: { readonly first: bigint; readonly last: bigint | null } | null;
  readonly count: CountPreference | null;
  readonly preferenceApplied: readonly string[];
  /** The query string in key order (src/query/query-string.ts, canonicalQueryString). */
  readonly canonicalQuery: string;
  /** Preferences sent under `handling=strict` that a read does not apply (PGRST122, refused by the planner). */
  readonly refusedPreferences: readonly string[];
  /** The Accept header as sent: negotiated by the planner, in PostgREST's order of refusals. */
  readonly acceptHeader: string | undefined;
}
