/**
 * The one error shape of the service (decisions D3): `{ code, message, details, hint }`.
 * Anything thrown as an ApiError reaches the caller as is; everything else becomes a 500
 * whose body says nothing about the internals.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: string | null = null,
    readonly hint: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  toBody() {
    return { code: this.code, message: this.message, details: this.details, hint: this.hint };
  }
}
