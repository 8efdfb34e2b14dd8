/**
 * A bulk statement's rows as a VALUES list, `($2::uuid, $3::text, …), (…)`: each column is named
 * once, with its SQL type and how to read it off an item, so the placeholders, the column list
 * and the parameters cannot fall out of step. One parameter per cell, cast in place: a VALUES
 * list is what Citus routes to a shard as it stands, where INSERT … SELECT FROM unnest(…) goes
 * through COPY, which row-level security refuses, and a cast of a column (an array literal to
 * text[]) in an UPDATE is a STABLE function on a column, which Citus refuses; a cast of a
 * parameter is evaluated before the statement is sent.
 */

/** A cell as the statement receives it: text in PostgreSQL's input form, or NULL. */
export type CellValue = string | number | boolean | null;

export interface ValuesColumn<Item> {
  readonly name: string;
  /** The SQL type the cell's parameter is cast to, e.g. `uuid` or `text[]`. */
  readonly type: string;
  readonly value: (item: Item) => CellValue;
}

export interface ValuesList {
  /** `(…), (…)`, to follow `values`. */
  readonly rows: string;
  /** The column names, in order, e.g. `id, email`. */
  readonly columns: string;
  /** One value per cell, row by row. */
  readonly params: (string | null)[];
}

/**
 * The cells are parameters `$firstParam` onwards; the caller's own parameters come before them.
 * `leading` are SQL expressions put first in every row (a caller's parameter such as `$1`); they
 * are not named in `columns`.
 */
export function valuesList<Item>(columns: readonly ValuesColumn<Item>[], items: readonly Item[], firstParam = 1, leading: readonly string[] = []): ValuesList {
  const params: (string | null)[] = [];
  const rows = items.map((item) => {
    const cells = columns.map((c) => {
      const value = c.value(item);
      params.push(value === null ? null : String(value));
      return `$${firstParam + params.length - 1}::${c.type}`;
    });
    return `(${[...leading, ...cells].join(', ')})`;
  });
  return { rows: rows.join(', '), columns: columns.map((c) => c.name).join(', '), params };
}
