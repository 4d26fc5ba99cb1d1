/**
 * The import's progress protocol, shared by the admin route and the CLI (kept apart so the
 * CLI loads no server code): a client that sends `Tributary-Progress: lines-stored` gets an
 * interim 102 answer with `Tributary-Lines-Stored: N` after each stored batch.
 */
export const PROGRESS_REQUEST_HEADER = 'tributary-progress';
export const PROGRESS_REQUEST_VALUE = 'lines-stored';
export const LINES_STORED_HEADER = 'tributary-lines-stored';
