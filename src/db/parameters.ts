/** A statement's bind parameters: each value added is sent as one and named by its `$n` placeholder. */
export class Parameters {
  readonly values: string[] = [];

  /** Binds `value` and answers its placeholder, `$1`, `$2`, … in the order added. */
  add(value: string): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}
