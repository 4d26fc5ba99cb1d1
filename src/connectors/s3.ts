/**
 * The s3 driver (loaded by drivers.ts only when an S3 connector is called): get, put and list objects (and HeadBucket to verify) in an S3 or
 * S3-compatible bucket through @aws-sdk/client-s3. Settings: config.region, config.bucket,
 * config.access_key_id, optional config.endpoint (S3-compatible stores) and
 * config.force_path_style; the secret is the secret access key. Connections go through
 * agents with the egress guard's lookup, like every outbound call.
 */
import http from 'node:http';
import https from 'node:https';
import { GetObjectCommand, HeadBucketCommand, ListObjectsV2Command, PutObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { baseUrlProblem } from '../egress.ts';
import type { ConnectorRecord } from './auth.ts';
import { ConnectorConfigError, networkFailure, ProviderUnavailable, RequestProblem } from './errors.ts';
import { guardedLookup, type OutboundResponse } from './http.ts';
import type { Scalars } from './operations.ts';
import { S3_OPERATIONS } from './driver-operations.ts';

/** Objects read larger than this fail the step (the output is stored with the run). */
export const S3_MAX_OBJECT_BYTES = 5 * 1_048_576;

const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);

export interface S3Settings {
  region: string;
  bucket: string;
  endpoint: string | undefined;
  forcePathStyle: boolean;
  accessKeyId: string;
}

export function s3Settings(c: ConnectorRecord, allowPrivateEgress: boolean): S3Settings {
  const cfg = c.config ?? {};
  const region = str(cfg.region);
  const bucket = str(cfg.bucket);
  const accessKeyId = str(cfg.access_key_id);
  if (!region) throw new ConnectorConfigError('An s3 connector needs config.region');
  if (!bucket) throw new ConnectorConfigError('An s3 connector needs config.bucket');
  if (!accessKeyId) throw new ConnectorConfigError('An s3 connector needs config.access_key_id');
  const endpoint = str(cfg.endpoint);
  if (endpoint !== undefined) {
    const problem = baseUrlProblem(endpoint, allowPrivateEgress);
    if (problem) throw new ConnectorConfigError(`config.endpoint ${problem}`);
  }
  return { region, bucket, endpoint, forcePathStyle: cfg.force_path_style === true, accessKeyId };
}

const clients = new Map<string, S3Client>();

function clientFor(c: ConnectorRecord, s: S3Settings, allowPrivateEgress: boolean): S3Client {
  if (c.secret === undefined) throw new ConnectorConfigError('An s3 connector needs its secret access key as the secret');
  const key = `${c.id}:${c.updated_at.getTime()}:${allowPrivateEgress}`;
  let client = clients.get(key);
  if (!client) {
    const agentOptions = { keepAlive: true, ...(allowPrivateEgress ? {} : { lookup: guardedLookup as never }) };
    client = new S3Client({
      region: s.region,
      endpoint: s.endpoint,
      forcePathStyle: s.forcePathStyle,
      credentials: { accessKeyId: s.accessKeyId, secretAccessKey: c.secret },
      maxAttempts: 1, // the run's attempts are the retries
      requestHandler: new NodeHttpHandler({
        connectionTimeout: 5_000,
        requestTimeout: 30_000,
        httpAgent: new http.Agent(agentOptions),
        httpsAgent: new https.Agent(agentOptions),
      }),
    });
    // One client per connector version; an old version's goes.
    for (const [k, old] of clients) {
      if (!k.startsWith(`${c.id}:`)) continue;
      old.destroy();
      clients.delete(k);
    }
    clients.set(key, client);
  }
  return client;
}

/** What went wrong, as a step sees it: retried (throttling, 5xx, network) or not. */
function mapError(err: unknown): Error {
  const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  if (err instanceof S3ServiceException || (typeof status === 'number' && status >= 300)) {
    const e = err as S3ServiceException;
    const code = status ?? 0;
    const text = `The provider answered ${code}${e.name && e.name !== 'Unknown' ? ` (${e.name})` : ''}`;
    if (code === 429 || code >= 500 || e.name === 'SlowDown' || e.name === 'ThrottlingException') return new ProviderUnavailable(text);
    return new RequestProblem(text);
  }
  return networkFailure(err) ?? (err as Error);
}

function objectBody(bytes: Uint8Array, contentType: string | undefined): unknown {
  const type = (contentType ?? '').toLowerCase();
  const text = Buffer.from(bytes).toString('utf8');
  if (/json/.test(type)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  if (/^text\/|xml|csv|yaml/.test(type) || Buffer.from(text, 'utf8').equals(Buffer.from(bytes))) return text;
  return { encoding: 'base64', data: Buffer.from(bytes).toString('base64') };
}

/** One S3 operation; `params` are the operation's parameters by name, `body` the PutObject content. */
export async function callS3(c: ConnectorRecord, allowPrivateEgress: boolean, operation: string, params: Scalars, body: unknown): Promise<OutboundResponse> {
  const s = s3Settings(c, allowPrivateEgress);
  const client = clientFor(c, s, allowPrivateEgress);
  const key = () => {
    if (params.key === undefined || params.key === '') throw new RequestProblem(`${operation} needs params.key`);
    return params.key;
  };
  try {
    switch (operation) {
      case 'HeadBucket': {
        const r = await client.send(new HeadBucketCommand({ Bucket: s.bucket }));
        return { status: r.$metadata.httpStatusCode ?? 200, headers: {}, body: null };
      }
      case 'ListObjectsV2': {
        const max = params['max-keys'] === undefined ? undefined : Number(params['max-keys']);
        if (max !== undefined && !(Number.isInteger(max) && max >= 1 && max <= 1000))
          throw new RequestProblem('max-keys must be a whole number from 1 to 1000');
        const r = await client.send(
          new ListObjectsV2Command({ Bucket: s.bucket, Prefix: params.prefix, MaxKeys: max, ContinuationToken: params['continuation-token'] }),
        );
        return {
          status: r.$metadata.httpStatusCode ?? 200,
          headers: {},
          body: {
            Contents: (r.Contents ?? []).map((o) => ({ Key: o.Key, Size: o.Size, LastModified: o.LastModified?.toISOString(), ETag: o.ETag })),
            IsTruncated: r.IsTruncated ?? false,
            NextContinuationToken: r.NextContinuationToken ?? null,
          },
        };
      }
      case 'GetObject': {
        const r = await client.send(new GetObjectCommand({ Bucket: s.bucket, Key: key() }));
        if ((r.ContentLength ?? 0) > S3_MAX_OBJECT_BYTES) {
          await r.Body?.transformToByteArray().catch(() => undefined);
          throw new RequestProblem(`The object is larger than ${S3_MAX_OBJECT_BYTES} bytes`);
        }
        const bytes = (await r.Body?.transformToByteArray()) ?? new Uint8Array();
        const headers: Record<string, string> = {};
        if (r.ContentType) headers['content-type'] = r.ContentType;
        if (r.ETag) headers.etag = r.ETag;
        if (r.LastModified) headers['last-modified'] = r.LastModified.toUTCString();
        return { status: r.$metadata.httpStatusCode ?? 200, headers, body: objectBody(bytes, r.ContentType) };
      }
      case 'PutObject': {
        const text = typeof body === 'string' ? body : JSON.stringify(body ?? null);
        const contentType = params['content-type'] ?? (typeof body === 'string' ? 'text/plain; charset=utf-8' : 'application/json');
        const r = await client.send(new PutObjectCommand({ Bucket: s.bucket, Key: key(), Body: text, ContentType: contentType }));
        return { status: r.$metadata.httpStatusCode ?? 200, headers: r.ETag ? { etag: r.ETag } : {}, body: null };
      }
      default:
        throw new RequestProblem(`${operation} is not an s3 operation (${S3_OPERATIONS.join(', ')})`);
    }
  } catch (err) {
    throw mapError(err);
  }
}
