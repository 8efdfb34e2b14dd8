/** A mistake in what pds-sync was given (options, configuration, files): reported before anything is sent. */
export class SyncInputError extends Error {}

/** The service refused the sync in a way a retry cannot fix, or stayed unavailable through every attempt. */
export class SyncRequestError extends Error {}
