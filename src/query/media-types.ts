/** The Accept header: the one media type that changes a read, PostgREST's single object. */
export const SINGULAR_MEDIA_TYPE = 'application/vnd.pgrst.object+json';

/** Whether any of the Accept header's media types (parameters aside) is the single object. */
export function acceptsSingularObject(acceptHeader: string | undefined): boolean {
  return (acceptHeader ?? '').split(',').some((t) => t.split(';')[0].trim().toLowerCase() === SINGULAR_MEDIA_TYPE);
}
