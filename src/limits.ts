/**
 * The limits of the interface, in one place: the parser, the planner, the routes, the error
 * catalogue and the documentation (docs/api.md, "Limits") all read them from here.
 */
export const LIMITS = {
  maxQueryStringBytes: 16_384,
  maxConditions: 200,
  maxTreeDepth: 10,
  maxListValues: 1_000,
  maxSelectItems: 50,
  /** json_build_object takes at most 100 arguments: 50 key/value pairs. */
  maxOutputColumns: 50,
  maxOrderTerms: 10,
  /** Characters in one like/ilike/match/imatch pattern (each element of an `any`/`all` list is one). */
  maxPatternLength: 256,
  /** Repetition operators (`*`, `+`, `?`, `{m,n}`) in one regular expression. */
  maxPatternRepetitions: 20,
  /** The largest count a `{m,n}` bound may name (PostgreSQL itself allows 255). */
  maxRepetitionBound: 100,
  rowsPerResponse: 10_000,
  batchRows: 500,
  bodyBytes: 4 * 1024 * 1024,
} as const;

export type Limit = keyof typeof LIMITS;

/** What each limit bounds and what a request over it gets; a new limit must say both. */
export const LIMIT_DESCRIPTIONS: Readonly<Record<Limit, { readonly bounds: string; readonly answer: string }>> = {
  maxQueryStringBytes: { bounds: 'bytes of a read\'s query string', answer: '414 `URI_TOO_LONG`' },
  maxConditions: { bounds: 'filters and logic-tree nodes of one read', answer: '400 `QUERY_TOO_COMPLEX`' },
  maxTreeDepth: { bounds: 'nesting of `and`/`or` trees', answer: '400 `QUERY_TOO_COMPLEX`' },
  maxListValues: { bounds: 'values in one `in.(…)` list', answer: '400 `QUERY_TOO_COMPLEX`' },
  maxSelectItems: { bounds: 'items of `select`', answer: '400 `QUERY_TOO_COMPLEX`' },
  maxOutputColumns: { bounds: 'columns a read returns (`*` counts each)', answer: '400 `QUERY_TOO_COMPLEX`' },
  maxOrderTerms: { bounds: 'terms of `order`', answer: '400 `QUERY_TOO_COMPLEX`' },
  maxPatternLength: { bounds: 'characters of a `like`, `ilike`, `match` or `imatch` pattern', answer: '400 `PATTERN_TOO_COMPLEX`' },
  maxPatternRepetitions: { bounds: 'repetition operators in one regular expression (back-references and repeated repeating groups are refused outright)', answer: '400 `PATTERN_TOO_COMPLEX`' },
  maxRepetitionBound: { bounds: 'the count a `{m,n}` bound of a regular expression may name', answer: '400 `PATTERN_TOO_COMPLEX`' },
  rowsPerResponse: { bounds: 'rows of one list response', answer: 'a larger `limit` is cut to it; an omitted limit returns at most this many' },
  batchRows: { bounds: 'rows of one write', answer: '413 `BATCH_TOO_LARGE`, nothing written' },
  bodyBytes: { bounds: 'bytes of a request body', answer: '413 `PAYLOAD_TOO_LARGE`, nothing written' },
};
