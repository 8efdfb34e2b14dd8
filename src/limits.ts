/**
 * The limits of the interface, in one place: the parser, the planner, the routes, the error
 * catalogue and the documentation (docs/api.md, "Limits") all read them from here.
 */
import type { ErrorCode } from './errors.ts';

export const LIMITS = {
  maxQueryStringBytes: 16_384,
  maxConditions: 200,
  maxTreeDepth: 10,
  maxListValues: 1_000,
  maxSelectItems: 50,
  /** json_build_object takes at most 100 arguments: 50 key/value pairs. */
  maxOutputColumns: 50,
  maxOrderTerms: 10,
  /** Steps of a JSON path, brackets within a JSON value, parentheses and negations within a full-text query (src/query/nesting.ts). */
  maxNesting: 20,
  /**
   * Words of the full-text queries of one read (src/query/nesting.ts). Each is matched against
   * every row's text: 2,000 of them held a reader session for the whole statement timeout.
   */
  maxSearchTerms: 32,
  /** Characters in one like/ilike/match/imatch pattern (each element of an `any`/`all` list is one). */
  maxPatternLength: 256,
  /** Repetition operators (`*`, `+`, `?`, `{m,n}`) in one regular expression. */
  maxPatternRepetitions: 20,
  /** The largest count a `{m,n}` bound may name (PostgreSQL itself allows 255). */
  maxRepetitionBound: 100,
  rowsPerResponse: 10_000,
  /** Rows a page may hold to be sent whole; a larger one is sent as the client reads it (src/query/execute.ts). */
  wholePageRows: 1_000,
  /** Larger pages sent at once to one scope: each holds a database connection until its client has read it. */
  largePagesPerScope: 2,
  /** Requests of one token in progress at once on an instance (src/http/in-flight.ts). */
  requestsInFlightPerToken: 64,
  batchRows: 500,
  bodyBytes: 4 * 1024 * 1024,
  /** Arrays and objects within one another in a body: a batch needs 4 (body, rows, row, a list value). */
  bodyDepth: 32,
  /**
   * Field names across the rows of one write, and characters of each: every one a record does not
   * hold comes back in `dropped_fields`. A row of 340,000 made-up names (4 MB) took 0.5–0.7 s of
   * the event loop, and its 3.3 MB answer was kept a day for its Idempotency-Key.
   */
  batchFieldNames: 200,
  fieldNameChars: 100,
  /**
   * Characters of a sent email or cohort name that its result row echoes; a longer one (no key
   * is valid at that length) is cut there. A rejected row echoed a 4 MB email whole, and the
   * answer was kept a day for its Idempotency-Key.
   */
  echoedKeyChars: 1_000,
  /** Room above the query-string cap, so that it is the service's 414 that answers a long one. */
  headerBytes: 64 * 1024,
  /** Records of one page of an operator API list (`limit`). */
  operatorPageRows: 1_000,
  /** How long a rotated token may stay valid beside its replacement (`grace_seconds`): 30 days. */
  rotationGraceSeconds: 30 * 24 * 60 * 60,
  /** Characters of an Idempotency-Key, each printable ASCII. */
  idempotencyKeyChars: 255,
  /** How long a write's Idempotency-Key and its stored answer are kept, from the first request: a day, as Stripe. */
  idempotencyKeySeconds: 24 * 60 * 60,
  /** How long a running write holds its key; past it (its process died) a repeat may take the key over. */
  idempotencyLeaseSeconds: 60,
  /** Entries of one change feed page (`limit`). */
  changesPerResponse: 5_000,
} as const;

/** What the change feed uses when a request does not say. */
export const CHANGE_FEED_DEFAULTS = {
  pageChanges: 500,
} as const;

/** What the operator API uses when a request does not say. */
export const OPERATOR_DEFAULTS = {
  pageRows: 100,
  rotationGraceSeconds: 24 * 60 * 60,
} as const;

export type Limit = keyof typeof LIMITS;

/** What each limit bounds and what a request over it gets (a catalogue code, with a note where needed). */
interface LimitDescription {
  readonly bounds: string;
  readonly code?: ErrorCode;
  readonly note?: string;
}

/** A new limit must say both; the docs' "Limits" table is generated from this. */
export const LIMIT_DESCRIPTIONS: Readonly<Record<Limit, LimitDescription>> = {
  maxQueryStringBytes: { bounds: 'bytes of a read\'s query string', code: 'URI_TOO_LONG' },
  maxConditions: { bounds: 'filters and logic-tree nodes of one read', code: 'QUERY_TOO_COMPLEX' },
  maxTreeDepth: { bounds: 'nesting of `and`/`or` trees', code: 'QUERY_TOO_COMPLEX' },
  maxListValues: { bounds: 'values in one `in.(…)` list', code: 'QUERY_TOO_COMPLEX' },
  maxSelectItems: { bounds: 'items of `select`', code: 'QUERY_TOO_COMPLEX' },
  maxOutputColumns: { bounds: 'columns a read returns (`*` counts each)', code: 'QUERY_TOO_COMPLEX' },
  maxOrderTerms: { bounds: 'terms of `order`', code: 'QUERY_TOO_COMPLEX' },
  maxNesting: {
    bounds: 'steps of a JSON path; arrays and objects nested in a JSON value; parentheses and negations (`!`, `-` in `wfts`) nested in a full-text query',
    code: 'QUERY_TOO_COMPLEX',
  },
  maxSearchTerms: { bounds: 'words of the full-text queries (`fts`, `plfts`, `phfts`, `wfts`) of one read, together', code: 'QUERY_TOO_COMPLEX' },
  maxPatternLength: { bounds: 'characters of a `like`, `ilike`, `match` or `imatch` pattern', code: 'PATTERN_TOO_COMPLEX' },
  maxPatternRepetitions: {
    bounds: 'repetition operators in one regular expression (back-references and repeated repeating groups are refused outright)',
    code: 'PATTERN_TOO_COMPLEX',
  },
  maxRepetitionBound: { bounds: 'the count a `{m,n}` bound of a regular expression may name', code: 'PATTERN_TOO_COMPLEX' },
  rowsPerResponse: { bounds: 'rows of one list response', note: 'a larger `limit` is cut to it; an omitted limit returns at most this many' },
  wholePageRows: {
    bounds: 'rows of a page sent whole', note: 'a larger page is sent as the client reads it, and holds a database connection until the client has read it all',
  },
  largePagesPerScope: {
    bounds: 'larger pages being sent at once to one scope (a university, or a consortium)', code: 'TOO_MANY_LARGE_PAGES',
    note: 'and at most half of an instance\'s connections send large pages at once (503 `DATABASE_BUSY`)',
  },
  requestsInFlightPerToken: {
    bounds: 'requests of one token in progress at once on an instance, each until its answer has been read', code: 'TOO_MANY_REQUESTS_IN_FLIGHT',
  },
  batchRows: { bounds: 'rows of one write', code: 'BATCH_TOO_LARGE', note: 'nothing written' },
  bodyBytes: { bounds: 'bytes of a request body', code: 'PAYLOAD_TOO_LARGE', note: 'nothing written' },
  bodyDepth: { bounds: 'arrays and objects nested within one another in a request body', code: 'INVALID_BODY', note: 'nothing written' },
  batchFieldNames: { bounds: 'distinct field names across the rows of one write', code: 'INVALID_BODY', note: 'nothing written' },
  fieldNameChars: { bounds: 'characters of a field name in a write\'s row', code: 'INVALID_BODY', note: 'nothing written' },
  echoedKeyChars: { bounds: 'characters of a row\'s `email` or `name` as its result echoes it', note: 'a longer one is cut there and ends with `…`' },
  headerBytes: { bounds: 'bytes of the request line and headers', code: 'HEADERS_TOO_LARGE' },
  operatorPageRows: {
    bounds: `records of one operator API list page (\`limit\`, default ${OPERATOR_DEFAULTS.pageRows})`, code: 'INVALID_PARAMETER',
  },
  rotationGraceSeconds: {
    bounds: `seconds a rotated token stays valid beside its replacement (\`grace_seconds\`, default ${OPERATOR_DEFAULTS.rotationGraceSeconds.toLocaleString('en-US')})`,
    code: 'INVALID_BODY',
  },
  idempotencyKeyChars: { bounds: 'characters of an `Idempotency-Key` (printable ASCII)', code: 'INVALID_IDEMPOTENCY_KEY' },
  idempotencyKeySeconds: {
    bounds: 'seconds a write\'s `Idempotency-Key` and its stored answer are kept, from its first request',
    note: 'then the key is free again; expired keys are purged',
  },
  idempotencyLeaseSeconds: {
    bounds: 'seconds a write in progress holds its `Idempotency-Key` against a repeat', code: 'IDEMPOTENCY_KEY_IN_USE',
    note: 'a repeat past it (the first write\'s process died) takes the key over',
  },
  changesPerResponse: {
    bounds: `entries of one change feed page (\`limit\`, default ${CHANGE_FEED_DEFAULTS.pageChanges})`, code: 'INVALID_PARAMETER',
  },
};
