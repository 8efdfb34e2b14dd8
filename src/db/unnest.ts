/**
 * A bulk statement's rows as `unnest($2::uuid[], $3::text[], …) as u(id, email, …)`: each
 * column is named once, with its SQL type and how to read it off an item, so the
 * placeholders, the column list and the parameters cannot fall out of step.
 */
import { arrayLiteral } from './array-literal.ts';

/** A cell as the statement receives it: text in PostgreSQL's input form, or NULL. */
export type CellValue = string | number | boolean | null;

export interface UnnestColumn<Item> {
  readonly name: string;
  /** The element type, e.g. `uuid`; the parameter is an array of it. */
  readonly type: string;
  readonly value: (item: Item) => CellValue;
}

export interface Unnest {
  /** `unnest(…) as <alias>(…)`, to follow `from`. */
  readonly rows: string;
  /** One array literal per column, in column order. */
  readonly params: string[];
}

/**
 * The column arrays are parameters `$firstParam` onwards; the caller's own parameters come
 * before them.
 */
export function unnest<Item>(columns: readonly UnnestColumn<Item>[], items: readonly Item[], firstParam = 1, alias = 'u'): Unnest {
  const arrays = columns.map((c, i) => `$${firstParam + i}::${c.type}[]`).join(', ');
  return {
    rows: `unnest(${arrays}) as ${alias}(${columns.map((c) => c.name).join(', ')})`,
    params: columns.map((c) => arrayLiteral(items.map((item) => {
      const value = c.value(item);
      return value === null ? null : String(value);
    }))),
  };
}
