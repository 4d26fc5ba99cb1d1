/** The operations the non-http drivers perform (a step's operation_ref), by connector type. */
export const S3_OPERATIONS = ['HeadBucket', 'ListObjectsV2', 'GetObject', 'PutObject'] as const;
export const SNOWFLAKE_OPERATIONS = ['submitStatement'] as const;

export const DRIVER_OPERATIONS: Readonly<Record<string, readonly string[]>> = { s3: S3_OPERATIONS, snowflake: SNOWFLAKE_OPERATIONS };
