/**
 * `tributary connector create|list|verify` and `tributary api-spec import`: clients of the
 * JSON:API with a service account's client credentials (api-client.ts: @tributary/client),
 * as any program of the user's would be. A connector's secret is read from a file or stdin,
 * never from an option: argv is visible to every user of the machine (ps, /proc).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { parse as parseYaml } from 'yaml';
import { listOperations } from '../connectors/operations.ts';
import { AUTH_TYPES, CONNECTOR_TYPES, DIRECTIONS } from '../resources/external_connectors/resource.ts';
import { CommandFailure, EXIT_FAILURE, UsageError, commandRunner } from './admin-client.ts';
import type { CreateData } from '../../packages/client/src/index.ts';
import type { ApiClient } from './api-client.ts';
import { renderHuman, renderTable } from './admin-commands.ts';

type Io = { out: (s: string) => void; err: (s: string) => void };
type Data = Record<string, unknown>;

/** A resource object as one flat record: its id and its attributes. */
export function flatten(resource: unknown): Data {
  const r = (resource ?? {}) as { id?: unknown; attributes?: Data };
  return { id: r.id, ...r.attributes };
}

/** Reads a file given on the command line, `-` being stdin; a failure names the file. */
function readInput(file: string, what: string, stdin: () => string): string {
  try {
    return file === '-' ? stdin() : fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : code === 'EACCES' ? 'permission denied' : String(code ?? err);
    throw new CommandFailure(`cannot read ${what} ${file === '-' ? 'from stdin' : file}: ${why}`, 'unreadable_file');
  }
}

/** The secret as the file holds it, less one line ending (what `echo` or an editor adds). */
export function secretFrom(text: string, file: string): string {
  const secret = text.replace(/\r?\n$/, '');
  if (secret === '') throw new UsageError(`the secret file ${file === '-' ? '(stdin)' : file} is empty`);
  return secret;
}

/** A JSON or YAML file holding one object: the connector's config. */
export function configFrom(text: string, file: string): Data {
  let parsed: unknown;
  try {
    parsed = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text, { maxAliasCount: 10, merge: false });
  } catch (err) {
    throw new UsageError(`--config-file ${file} is not JSON or YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new UsageError(`--config-file ${file} must hold one object (the connector's config)`);
  return parsed as Data;
}

/** `key=value` for config: a value that reads as JSON (true, 10, {...}) is taken as JSON, anything else as text. */
function setArg(value: string, previous: Array<[string, unknown]> = []): Array<[string, unknown]> {
  const at = value.indexOf('=');
  if (at < 1) throw new InvalidArgumentError('expected key=value, e.g. region=eu-west-1');
  const raw = value.slice(at + 1);
  let v: unknown = raw;
  if (/^(true|false|null|-?\d+(\.\d+)?|\{.*\}|\[.*\])$/s.test(raw.trim())) {
    try {
      v = JSON.parse(raw);
    } catch {
      v = raw;
    }
  }
  return [...previous, [value.slice(0, at), v]];
}

function csvArg(value: string): string[] {
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export interface CreateOptions {
  name: string;
  type?: string;
  auth?: string;
  direction?: string;
  provider?: string;
  description?: string;
  baseUrl?: string;
  healthOperation?: string;
  headerName?: string;
  username?: string;
  clientId?: string;
  tokenUrl?: string;
  scopes?: string[];
  set?: Array<[string, unknown]>;
  configFile?: string;
  secretFile?: string;
}

/** The attributes of a new connector: the config file, then the options over it; the secret from its file. */
export function connectorAttributes(o: CreateOptions, stdin: () => string): Data {
  if (o.secretFile === '-' && o.configFile === '-') throw new UsageError('--secret-file and --config-file cannot both be stdin (-)');
  const config: Data = o.configFile === undefined ? {} : configFrom(readInput(o.configFile, 'the config file', stdin), o.configFile);
  const flags: Array<[string, unknown]> = [
    ['base_url', o.baseUrl],
    ['health_operation', o.healthOperation],
    ['header_name', o.headerName],
    ['username', o.username],
    ['client_id', o.clientId],
    ['token_url', o.tokenUrl],
    ['scopes', o.scopes],
    ...(o.set ?? []),
  ];
  for (const [k, v] of flags) if (v !== undefined) config[k] = v;
  const attrs: Data = { name: o.name };
  if (o.type !== undefined) attrs.type = o.type;
  if (o.auth !== undefined) attrs.auth_type = o.auth;
  if (o.direction !== undefined) attrs.direction = o.direction;
  if (o.provider !== undefined) attrs.provider_slug = o.provider;
  if (o.description !== undefined) attrs.description = o.description;
  if (Object.keys(config).length > 0) attrs.config = config;
  // Without a provider to supply it, a connector has no type nor auth: say so here rather than after a round trip.
  if (o.provider === undefined) {
    attrs.type ??= 'http';
    if (attrs.auth_type === undefined)
      throw new UsageError('--auth is required (none, api_key, bearer_token, basic_auth, oauth2, hmac) unless --provider supplies it');
  }
  if (o.secretFile !== undefined) attrs.secret = secretFrom(readInput(o.secretFile, 'the secret', stdin), o.secretFile);
  return attrs;
}

/** json or yaml: from --format, else the file's extension, else its first character. */
export function specFormat(file: string, text: string, given: string | undefined): 'json' | 'yaml' {
  if (given === 'json' || given === 'yaml') return given;
  const ext = path.extname(file).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.yaml' || ext === '.yml') return 'yaml';
  return text.trimStart().startsWith('{') ? 'json' : 'yaml';
}

const CONNECTOR_COLUMNS = ['id', 'name', 'type', 'auth_type', 'direction', 'status', 'last_verified_at', 'last_error'] as const;

/** A connector for people: its settings, never a secret (the API returns none). */
function renderConnector(c: Data): string {
  const { organization_id: _org, ...shown } = c;
  return renderHuman(shown);
}

function renderSpec(s: Data): string {
  const ops = Array.isArray(s.operations) ? (s.operations as Data[]).map((o) => String(o.operation_ref)) : [];
  return renderHuman({
    id: s.id,
    name: s.name,
    title: s.title,
    version: s.version,
    openapi_version: s.openapi_version,
    external_connector_id: s.external_connector_id,
    operations: `${ops.length}${ops.length > 0 ? ` (${listOperations(ops)})` : ''}`,
  });
}

/** stdin, read whole (a secret or a small config file). */
const readStdin = () => fs.readFileSync(0, 'utf8');

export function registerConnectorCommands(program: Command, io: Io, api: () => ApiClient, stdin: () => string = readStdin): void {
  const json = () => program.opts().json === true;

  const run = commandRunner(json, io);
  const print = (data: Data, render: (d: Data) => string) => io.out(json() ? `${JSON.stringify(data)}\n` : render(data));

  const connector = program.command('connector').description('external connectors (JSON:API, as the service account of --credentials or bootstrap.json)');
  connector
    .command('create')
    .description('create an external connector; the secret is read from --secret-file (or stdin with -), never from an option')
    .requiredOption('--name <name>', 'display name')
    .addOption(new Option('--type <type>', "driver (default http, or the provider's)").choices(CONNECTOR_TYPES))
    .addOption(new Option('--auth <auth-type>', 'how calls are authenticated (required unless --provider supplies it)').choices(AUTH_TYPES))
    .addOption(new Option('--direction <direction>', 'outbound (steps call it) or inbound (webhook triggers)').choices(DIRECTIONS))
    .option('--provider <slug>', 'a bundled provider: its settings and its specification (GET /api/json/v1/providers lists them)')
    .option('--description <text>', 'description')
    .option('--base-url <url>', 'config.base_url: where relative paths go (http)')
    .option('--health-operation <operation-ref>', 'config.health_operation: the operation verification calls (needs an attached specification)')
    .option('--header-name <name>', 'config.header_name: the header of an api_key (default X-Api-Key)')
    .option('--username <name>', 'config.username (basic_auth, snowflake)')
    .option('--client-id <id>', 'config.client_id (oauth2)')
    .option('--token-url <url>', 'config.token_url (oauth2)')
    .option('--scopes <a,b>', 'config.scopes (oauth2), comma-separated', csvArg)
    .option('--set <key=value>', 'any other config member (repeatable): region=eu-west-1, force_path_style=true', setArg)
    .option('--config-file <file>', 'the config object as a JSON or YAML file (- for stdin); options above override its members')
    .option('--secret-file <file>', 'a file holding the secret (API key, token, password, client secret, whsec_ key); - for stdin')
    .action((o: CreateOptions) =>
      run(async () => {
        const attrs = connectorAttributes(o, stdin);
        const doc = await api().create('external_connectors', { type: 'external_connector', attributes: attrs } as CreateData<'external_connectors'>);
        print(flatten(doc.data), renderConnector);
      }),
    );

  connector
    .command('list')
    .description('list the external connectors of the workspace, by name')
    .option(
      '--limit <n>',
      'at most this many rows, 1 to 250',
      (v) => {
        if (!/^\d{1,3}$/.test(v) || Number(v) < 1 || Number(v) > 250) throw new InvalidArgumentError('expected a whole number from 1 to 250');
        return Number(v);
      },
      100,
    )
    .addOption(new Option('--status <status>', 'only those with this status').choices(['unverified', 'verified', 'failing']))
    .addOption(new Option('--type <type>', 'only those of this driver').choices(CONNECTOR_TYPES))
    .addOption(new Option('--direction <direction>', 'only the inbound (webhook triggers) or only the outbound (steps call them)').choices(DIRECTIONS))
    .action((o: { limit: number; status?: string; type?: string; direction?: string }) =>
      run(async () => {
        const filter = { status: o.status, type: o.type, direction: o.direction };
        const page = await api().list('external_connectors', { sort: 'name', page: { limit: o.limit }, filter });
        const data = page.data.map(flatten);
        const hasMore = typeof page.links.next === 'string';
        if (json()) io.out(`${JSON.stringify({ data, has_more: hasMore })}\n`);
        else {
          io.out(renderTable(data, CONNECTOR_COLUMNS));
          if (hasMore) io.err(`note: there are more than ${data.length}; pass --limit (at most 250) or narrow with --status, --type, --direction\n`);
        }
      }),
    );

  connector
    .command('verify')
    .description(
      'make one cheap call through the connector and record the outcome; exits 1 when it is failing (an inbound connector is verified by its deliveries: exits 1 saying so)',
    )
    .argument('<connector-id>', 'connector id')
    .action((id: string) =>
      run(async () => {
        const doc = await api().verifyConnector(id);
        const c = flatten(doc.data);
        print(c, (d) => renderHuman({ id: d.id, name: d.name, status: d.status, last_verified_at: d.last_verified_at, last_error: d.last_error }));
        // A script can tell the outcome from the exit code; the reason is printed above (last_error).
        if (c.status !== 'verified') {
          if (!json()) io.err(`error: the connector is ${String(c.status)}: see last_error\n`);
          throw new CommanderError(EXIT_FAILURE, 'tributary.failing', `connector ${id} is ${String(c.status)}`);
        }
      }),
    );

  const spec = program.command('api-spec').description('API specifications (OpenAPI documents; JSON:API, as the service account)');
  spec
    .command('import')
    .description('upload an OpenAPI document (JSON or YAML); with --connector, attach it to that connector')
    .argument('<file>', 'the OpenAPI document (- for stdin)')
    .option('--connector <connector-id>', 'attach it to this connector (its external_connector_id)')
    .option('--name <name>', "display name (default: the file's name without its extension)")
    .addOption(new Option('--format <format>', 'json or yaml (default: from the extension, else the first character)').choices(['json', 'yaml']))
    .action((file: string, o: { connector?: string; name?: string; format?: string }) =>
      run(async () => {
        const text = readInput(file, 'the document', stdin);
        const name = o.name ?? (file === '-' ? 'stdin' : path.basename(file).replace(/\.(json|ya?ml)$/i, ''));
        const attributes: Data = { name, format: specFormat(file, text, o.format), raw_document: text };
        if (o.connector !== undefined) attributes.external_connector_id = o.connector;
        const doc = await api().create('api_specs', { type: 'api_spec', attributes } as CreateData<'api_specs'>);
        const { raw_document: _raw, ...shown } = flatten(doc.data);
        print(shown, renderSpec);
      }),
    );
}
