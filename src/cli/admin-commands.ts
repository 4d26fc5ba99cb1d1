/**
 * The administrative commands of `tributary`: thin clients of the admin API. With --json
 * every command prints exactly one JSON document on stdout (the object, or
 * {"error", "status", "code"}). Help asked for goes to stdout; usage errors to stderr.
 * Exit codes: 0 success, 1 failure, 2 usage error, 78 bad configuration.
 */
import { Command, CommanderError, Help, InvalidArgumentError, Option } from 'commander';
import { isUuid } from '../ids.ts';
import { EXIT_USAGE, createAdminClient, reportFailure, resolveClientSettings, type AdminClient } from './admin-client.ts';

export { EXIT_CONFIG, EXIT_FAILURE, EXIT_USAGE } from './admin-client.ts';

type Io = { out: (s: string) => void; err: (s: string) => void };
type Data = Record<string, unknown>;

const ROLES = ['owner', 'admin', 'member'] as const;

interface RunsReplayOptions {
  workflowVersion?: string;
  workspace?: string;
  workflow?: string;
  status?: string;
  outcome?: string;
  trigger?: string;
  since?: string;
  until?: string;
  limit?: number;
}

function scopesArg(value: string): string[] {
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.length === 0) throw new InvalidArgumentError('expected a comma-separated list of scopes (webhooks, api_read, api_write, embed)');
  return [...new Set(list)];
}

/** A widget's --config: any JSON object here; the server checks its members (the JSON:API writes' check). */
function configArg(value: string): Data {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('expected JSON such as {"mode":"timeline","bucket":"day","window":"P90D"}');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidArgumentError('expected a JSON object such as {"bucket":"day"}');
  return parsed as Data;
}

function positionArg(value: string): Data {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('expected JSON such as {"x":0,"y":0,"w":4,"h":3}');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new InvalidArgumentError('expected a JSON object such as {"x":0,"y":0,"w":4,"h":3}');
  return parsed as Data;
}

function formatValue(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && v.every((x) => typeof x !== 'object' || x === null)) return v.join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** Who a client id is, in a few lines. */
function renderWhoami(d: Data): string {
  const o = (v: unknown) => (v && typeof v === 'object' ? (v as Data) : {});
  const cred = o(d.credential);
  const ws = o(d.workspace);
  const org = o(d.organization);
  const m = o(d.run_as_membership);
  return (
    `client_id: ${formatValue(cred.client_id)}\n` +
    `credential: ${formatValue(cred.id)} (${formatValue(cred.name)}${cred.is_active === false ? ', inactive' : ''})\n` +
    `scopes: ${formatValue(d.scopes)}\n` +
    `workspace: ${formatValue(ws.id)} (${formatValue(ws.name)})\n` +
    `organization: ${formatValue(org.id)} (${formatValue(org.name)}, ${formatValue(org.domain)})\n` +
    `run_as_membership: ${formatValue(m.id)} (${formatValue(m.role)} ${formatValue(m.user_email)}${m.is_active === false ? ', inactive' : ''})\n`
  );
}

/** Milliseconds between two ISO times, for people: `850 ms`, `12.3 s`, `4 min 5 s`; empty when either is missing. */
export function duration(from: unknown, to: unknown): string {
  if (typeof from !== 'string' || typeof to !== 'string') return '';
  const ms = Date.parse(to) - Date.parse(from);
  if (!Number.isFinite(ms) || ms < 0) return '';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/**
 * One run for people: what it is and how it ended, then a line per step (key, status,
 * duration, and its error or why it was skipped). The payload and the steps' outputs are
 * in --json.
 */
export function renderRun(d: Data): string {
  const lines: string[] = [];
  const v = formatValue;
  lines.push(`run ${v(d.id)}: ${v(d.status)}${d.outcome ? ` (${v(d.outcome)})` : ''}`);
  lines.push(`workflow: ${d.workflow_name ? `${v(d.workflow_name)} (${v(d.workflow_id)})` : v(d.workflow_id)}, version ${v(d.workflow_version)}`);
  lines.push(`trigger: ${v(d.trigger_key) || '-'}${d.delivery_id ? `, delivery ${v(d.delivery_id)}` : ''}`);
  if (d.replay_of) lines.push(`replay of: ${v(d.replay_of)}`);
  lines.push(`attempt: ${v(d.attempt)} of ${v(d.max_attempts)}`);
  const took = duration(d.started_at, d.finished_at);
  lines.push(
    `inserted: ${v(d.inserted_at)}${d.started_at ? `, started ${v(d.started_at)}` : ''}${d.finished_at ? `, finished ${v(d.finished_at)}` : ''}${took ? ` (${took})` : ''}`,
  );
  if (d.resume_at) lines.push(`resumes at: ${v(d.resume_at)} (at the latest; it waits)`);
  lines.push(`facts written: ${v(d.facts_written)}`);
  if (d.trace_id) lines.push(`trace: ${v(d.trace_id)}`);
  if (d.error !== null && d.error !== undefined) lines.push(`error: ${v(d.error)}`);
  const steps = Array.isArray(d.steps) ? (d.steps as Data[]) : [];
  lines.push(steps.length === 0 ? 'steps: none run yet' : 'steps:');
  const width = Math.max(0, ...steps.map((s) => v(s.key).length));
  steps.forEach((s, i) => {
    const took = duration(s.started_at, s.finished_at);
    const why = s.error ? `  error: ${v(s.error)}` : s.reason ? `  ${v(s.reason)}` : '';
    lines.push(`  ${i + 1}. ${v(s.key).padEnd(width)}  ${v(s.status)}${took ? `  ${took}` : ''}${why}`);
  });
  lines.push("(the payload and each step's output: tributary runs show --json)");
  return `${lines.join('\n')}\n`;
}

/** Every line a command prints ends with a newline, the last one too (a shell prompt or `wc -l` after it). */
export const endLine = (text: string): string => (text === '' || text.endsWith('\n') ? text : `${text}\n`);

/** key: value lines. */
export function renderHuman(data: Data): string {
  return Object.entries(data)
    .map(([k, v]) => `${k}: ${formatValue(v)}\n`)
    .join('');
}

function stripPrefix(message: string): string {
  return message.replace(/^error:\s*/i, '').trim();
}

/**
 * Help asked for (--help, help CMD) to stdout; help shown for an incomplete command and
 * commander's usage errors to stderr, as exit code 2 (with --json, also as one JSON document
 * on stdout). Applied to the program and every command already registered; commands
 * added later inherit all of it from their parent.
 */
export function applyConventions(cmd: Command, io: Io, json: () => boolean): void {
  cmd.configureOutput({ writeOut: io.out, writeErr: io.err });
  cmd.configureHelp({
    // Required options are marked, so a reader sees what a command cannot do without.
    optionDescription(this: Help, option: Option): string {
      const text = Help.prototype.optionDescription.call(this, option);
      return option.mandatory ? `(required) ${text}` : text;
    },
  });
  cmd.exitOverride((err: CommanderError) => {
    if (err.code === 'commander.executeSubCommandAsync') return;
    if (err.exitCode === 0) throw err;
    const message = err.code === 'commander.help' ? 'incomplete command: see the usage on stderr' : stripPrefix(err.message);
    if (json()) io.out(`${JSON.stringify({ error: message, status: null, code: 'usage_error' })}\n`);
    throw new CommanderError(EXIT_USAGE, err.code, err.message);
  });
  for (const sub of cmd.commands) applyConventions(sub, io, json);
}

/** Rows as an aligned table under a header of column names; empty values print as "-". */
export function renderTable(rows: Data[], columns: readonly string[]): string {
  const cells = rows.map((r) => columns.map((c) => formatValue(r[c]) || '-'));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
  const line = (values: readonly string[]) => `${values.map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i]!))).join('  ')}\n`;
  return line(columns) + cells.map(line).join('');
}

function limitArg(value: string): number {
  if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > 1000) throw new InvalidArgumentError('expected a whole number from 1 to 1000');
  return Number(value);
}

export function registerAdminCommands(program: Command, io: Io): void {
  const json = () => program.opts().json === true;
  program
    .option('--url <url>', 'the server to administer (default: TRIBUTARY_URL or http://127.0.0.1:$PORT)')
    .option('--admin-token <token>', 'admin API token (default: TRIBUTARY_ADMIN_TOKEN or the DATA_DIR/admin-token file)');
  applyConventions(program, io, json);

  const settings = () => {
    const { url, adminToken } = program.opts() as { url?: string; adminToken?: string };
    return createAdminClient(resolveClientSettings({ url, adminToken }));
  };

  /** Runs one admin call and prints its result; on failure prints the error and exits non-zero. */
  const execute = async (call: (client: AdminClient) => Promise<Data>, note?: string, render: (data: Data) => string = renderHuman): Promise<void> => {
    const asJson = json();
    try {
      const data = await call(settings());
      io.out(asJson ? `${JSON.stringify(data)}\n` : endLine(`${render(data)}${note ? `\n${note}\n` : ''}`));
    } catch (err) {
      reportFailure(err, asJson, io);
    }
  };

  /**
   * `<group> list`: a table for people, {"data": [...], "has_more"} with --json. `filter` is
   * the option that narrows the list and the query parameter it becomes.
   */
  const addList = (
    group: Command,
    path: string,
    columns: readonly string[],
    filter?: { flags: string; description: string; parameter: string; key: string },
  ) => {
    const cmd = group
      .command('list')
      .description(`list ${group.description()}, oldest first`)
      .option('--limit <n>', 'at most this many rows, 1 to 1000', limitArg, 100);
    if (filter) cmd.option(filter.flags, filter.description);
    cmd.action(async (o: Record<string, unknown>) => {
      const asJson = json();
      try {
        const query = new URLSearchParams({ limit: String(o.limit) });
        if (filter && typeof o[filter.key] === 'string') query.set(filter.parameter, o[filter.key] as string);
        const page = await settings().list(`${path}?${query}`);
        if (asJson) {
          io.out(`${JSON.stringify(page)}\n`);
        } else {
          io.out(renderTable(page.data, columns));
          if (page.has_more)
            io.err(`note: there are more than ${page.data.length}; pass --limit (at most 1000)${filter ? ` or ${filter.flags.split(' ')[0]}` : ''}\n`);
        }
      } catch (err) {
        reportFailure(err, asJson, io);
      }
    });
  };
  const byOrg = { flags: '--org <org-id>', description: 'only those of this organization', parameter: 'organization_id', key: 'org' };
  const byWorkspace = { flags: '--workspace <workspace-id>', description: 'only those of this workspace', parameter: 'workspace_id', key: 'workspace' };

  const org = program.command('org').description('organizations');
  org
    .command('create')
    .description('create an organization')
    .requiredOption('--name <name>', 'display name')
    .requiredOption('--domain <domain>', 'DNS domain, unique')
    .action((o: { name: string; domain: string }) => execute((c) => c.request('POST', '/organizations', { name: o.name, domain: o.domain })));
  addList(org, '/organizations', ['id', 'name', 'domain']);

  const workspace = program.command('workspace').description('workspaces');
  workspace
    .command('create')
    .description('create a workspace in an organization')
    .requiredOption('--org <org-id>', 'organization id')
    .requiredOption('--name <name>', 'display name')
    .action((o: { org: string; name: string }) => execute((c) => c.request('POST', '/workspaces', { organization_id: o.org, name: o.name })));
  addList(workspace, '/workspaces', ['id', 'organization_id', 'name'], byOrg);

  const user = program.command('user').description('users');
  user
    .command('create')
    .description('create a user')
    .requiredOption('--email <email>', 'email address')
    .option('--first-name <name>', 'first name')
    .option('--last-name <name>', 'last name')
    .option('--timezone <tz>', 'IANA timezone, e.g. Europe/Berlin')
    .action((o: { email: string; firstName?: string; lastName?: string; timezone?: string }) =>
      execute((c) => c.request('POST', '/users', { email: o.email, first_name: o.firstName, last_name: o.lastName, timezone: o.timezone })),
    );
  addList(user, '/users', ['id', 'email', 'first_name', 'last_name']);

  const member = program.command('member').description('organization memberships');
  member
    .command('add')
    .description('add a user to an organization')
    .requiredOption('--org <org-id>', 'organization id')
    .requiredOption('--user <user-id>', 'user id')
    .addOption(new Option('--role <role>', 'role in the organization').choices(ROLES).makeOptionMandatory())
    .action((o: { org: string; user: string; role: string }) =>
      execute((c) => c.request('POST', '/memberships', { organization_id: o.org, user_id: o.user, role: o.role })),
    );
  member
    .command('deactivate')
    .description('deactivate a membership; accounts running as it stop working at once')
    .argument('<membership-id>', 'membership id')
    .action((id: string) => execute((c) => c.request('POST', `/memberships/${encodeURIComponent(id)}/deactivate`)));
  addList(member, '/memberships', ['id', 'organization_id', 'user_id', 'user_email', 'role', 'is_active'], byOrg);

  const credential = program.command('credential').description('service accounts (OAuth client credentials)');
  credential
    .command('create')
    .description('create a service account; prints its client_secret this once')
    .requiredOption('--workspace <workspace-id>', 'workspace id')
    .requiredOption('--run-as <membership-id>', 'membership the account acts as')
    .requiredOption('--name <name>', 'display name')
    .requiredOption('--scopes <a,b>', 'comma-separated scopes: webhooks, api_read, api_write, embed', scopesArg)
    .action((o: { workspace: string; runAs: string; name: string; scopes: string[] }) =>
      execute(
        (c) => c.request('POST', '/credentials', { workspace_id: o.workspace, run_as_membership_id: o.runAs, name: o.name, scopes: o.scopes }),
        'warning: the client_secret is shown only this once; store it now, it cannot be retrieved later.',
      ),
    );
  credential
    .command('update')
    .description("change a service account's scopes, active state or workspace")
    .argument('<credential-id>', 'service account id')
    .option('--scopes <a,b>', 'comma-separated scopes: webhooks, api_read, api_write, embed', scopesArg)
    .addOption(new Option('--active <bool>', 'activate or deactivate').choices(['true', 'false']))
    .option('--workspace <workspace-id>', "move to another workspace of the account's organization")
    .option('--revoke-tokens', 'refuse every access token minted before now')
    .action((id: string, o: { scopes?: string[]; active?: 'true' | 'false'; workspace?: string; revokeTokens?: boolean }, cmd: Command) => {
      const patch: Data = {};
      if (o.scopes !== undefined) patch.scopes = o.scopes;
      if (o.active !== undefined) patch.is_active = o.active === 'true';
      if (o.workspace !== undefined) patch.workspace_id = o.workspace;
      if (o.revokeTokens) patch.revoke_tokens = true;
      if (Object.keys(patch).length === 0)
        cmd.error('error: nothing to update: pass --scopes, --active, --workspace or --revoke-tokens', {
          exitCode: EXIT_USAGE,
          code: 'tributary.nothingToUpdate',
        });
      return execute((c) => c.request('PATCH', `/credentials/${encodeURIComponent(id)}`, patch));
    });
  addList(credential, '/credentials', ['id', 'workspace_id', 'name', 'client_id', 'scopes', 'is_active', 'run_as_membership_id'], byWorkspace);

  const widget = program.command('widget').description('dashboard widget placements');
  widget
    .command('create')
    .description('place a dashboard widget')
    .requiredOption('--workspace <workspace-id>', 'workspace id')
    .requiredOption('--data-model <slug-or-id>', 'data model of the workspace: its slug (as facts import takes) or its id')
    .requiredOption('--kind <kind>', 'widget kind: number, line, bar or table')
    .option('--position <json>', 'JSON {"x","y","w","h"} on the 12-column grid (default {"x":0,"y":0,"w":4,"h":3})', positionArg)
    .option('--title <title>', 'title')
    .option('--dashboard <name>', 'the dashboard it is on (default home)')
    .option('--config <json>', 'JSON: the widget config of docs/console.md, "Dashboards" (default {})', configArg)
    .action((o: { workspace: string; dataModel: string; kind: string; position?: Data; title?: string; dashboard?: string; config?: Data }) => {
      const model = isUuid(o.dataModel) ? { data_model_id: o.dataModel } : { data_model: o.dataModel };
      const body = { workspace_id: o.workspace, ...model, kind: o.kind, position: o.position, title: o.title, dashboard: o.dashboard, config: o.config };
      return execute((c) => c.request('POST', '/widgets', body));
    });
  widget
    .command('delete')
    .description('delete a dashboard widget placement (admin API, any workspace)')
    .argument('<widget-id>', 'widget id')
    .action((id: string) =>
      execute(
        (c) => c.request('DELETE', `/widgets/${encodeURIComponent(id)}`),
        undefined,
        () => `widget ${id} deleted\n`,
      ),
    );
  addList(widget, '/widgets', ['id', 'workspace_id', 'data_model_id', 'kind', 'title', 'dashboard'], byWorkspace);

  const dataModel = program.command('data-model').description('data models (created through the JSON:API)');
  addList(dataModel, '/data-models', ['id', 'workspace_id', 'slug', 'name'], byWorkspace);

  const runs = program.command('runs').description('workflow runs');
  runs
    .command('list')
    .description('list workflow runs, newest first')
    .option('--limit <n>', 'at most this many rows, 1 to 1000', limitArg, 100)
    .option('--workspace <workspace-id>', 'only those of this workspace')
    .option('--workflow <workflow-id>', 'only those of this workflow')
    .option('--status <status>', 'only those in this state: queued, running, retrying, waiting, succeeded, failed, cancelled')
    .option('--outcome <outcome>', 'only those that ended so: completed, stopped_at_condition, failed, dead_letter, cancelled')
    .action(async (o: { limit: number; workspace?: string; workflow?: string; status?: string; outcome?: string }) => {
      const asJson = json();
      try {
        const query = new URLSearchParams({ limit: String(o.limit) });
        if (o.workspace) query.set('workspace_id', o.workspace);
        if (o.workflow) query.set('workflow_id', o.workflow);
        if (o.status) query.set('status', o.status);
        if (o.outcome) query.set('outcome', o.outcome);
        const page = await settings().list(`/runs?${query}`);
        if (asJson) io.out(`${JSON.stringify(page)}\n`);
        else {
          io.out(
            renderTable(
              page.data.map((r) => ({ ...r, workflow: r.workflow_name ?? r.workflow_id })),
              ['id', 'workflow', 'workflow_version', 'trigger_key', 'status', 'outcome', 'attempt', 'facts_written', 'inserted_at', 'error'],
            ),
          );
          if (page.has_more)
            io.err(`note: there are more than ${page.data.length}; pass --limit (at most 1000) or narrow with --workspace, --workflow, --status, --outcome\n`);
        }
      } catch (err) {
        reportFailure(err, asJson, io);
      }
    });
  runs
    .command('show')
    .description('show one run with its payload and step records (--json: the run as the admin API answers it)')
    .argument('<run-id>', 'run id')
    .action((id: string) => execute((c) => c.request('GET', `/runs/${encodeURIComponent(id)}`), undefined, renderRun));
  runs
    .command('cancel')
    .description('cancel a queued, retrying or waiting run: it never runs or resumes again (a running or finished run is refused)')
    .argument('<run-id>', 'run id')
    .action((id: string) => execute((c) => c.request('POST', `/runs/${encodeURIComponent(id)}/cancel`), undefined, renderRun));
  runs
    .command('replay')
    .description(
      'run a run again with the same payload, linked by replay_of: one run by id, or every finished run the filters match (oldest first, at most --limit)',
    )
    .argument('[run-id]', 'run id (or filters instead)')
    // Not --version: the program's own --version (print the version) is recognised after a subcommand too.
    .addOption(
      new Option('--workflow-version <which>', "the workflow version to run on: original (the run's own, the default) or current").choices([
        'original',
        'current',
      ]),
    )
    .option('--workspace <workspace-id>', 'only runs of this workspace')
    .option('--workflow <workflow-id>', 'only runs of this workflow')
    .addOption(new Option('--status <status>', 'only runs in this state').choices(['succeeded', 'failed']))
    .addOption(new Option('--outcome <outcome>', 'only runs with this outcome').choices(['completed', 'stopped_at_condition', 'failed', 'dead_letter']))
    .option('--trigger <key>', 'only runs started by this trigger key')
    .option('--since <time>', 'only runs inserted at or after this ISO 8601 time, or this long ago (2h, 30m, 7d)')
    .option('--until <time>', 'only runs inserted before this ISO 8601 time, or this long ago')
    .option('--limit <n>', 'at most this many runs, 1 to 1000 (default 1000)', limitArg)
    .action(async (id: string | undefined, o: RunsReplayOptions, cmd: Command) => {
      const filters = {
        workflow_id: o.workflow,
        status: o.status,
        outcome: o.outcome,
        trigger_key: o.trigger,
        since: o.since,
        until: o.until,
      };
      const narrowed = Object.values(filters).some((v) => v !== undefined);
      if (id !== undefined) {
        if (narrowed || o.workspace !== undefined || o.limit !== undefined)
          cmd.error('error: give a run id or filters, not both', { exitCode: EXIT_USAGE, code: 'tributary.replayArguments' });
        return execute((c) => c.request('POST', `/runs/${encodeURIComponent(id)}/replay`, o.workflowVersion ? { version: o.workflowVersion } : undefined));
      }
      if (!narrowed)
        cmd.error('error: give a run id, or at least one of --workflow, --status, --outcome, --trigger, --since, --until', {
          exitCode: EXIT_USAGE,
          code: 'tributary.replayArguments',
        });
      const renderReplayed = (d: Data) =>
        `replayed ${formatValue(d.replayed)} run${d.replayed === 1 ? '' : 's'}` +
        (d.has_more ? '\nnote: more runs matched; run the same command again to replay the next ones (a replayed run is not replayed twice)' : '') +
        '\n';
      return execute(
        (c) => c.request('POST', '/runs/replay', { ...filters, workspace_id: o.workspace, version: o.workflowVersion, limit: o.limit }),
        undefined,
        renderReplayed,
      );
    });

  program
    .command('whoami')
    .description('show the service account of a client id: its workspace, organization, run-as member and scopes')
    .argument('[client-id]', 'client id (tbci_...)')
    .option('--client-id <client-id>', 'client id, as an option')
    .action((positional: string | undefined, o: { clientId?: string }, cmd: Command) => {
      const clientId = positional ?? o.clientId;
      if (!clientId) cmd.error('error: a client id is required: tributary whoami <client-id>', { exitCode: EXIT_USAGE, code: 'tributary.missingClientId' });
      return execute((c) => c.request('GET', `/whoami?${new URLSearchParams({ client_id: clientId! })}`), undefined, renderWhoami);
    });

  program
    .command('sweep')
    .description('run the retention sweep now (facts past retention, expired idempotency keys and delivery guards, old finished runs)')
    .action(() => execute((c) => c.request('POST', '/sweep', undefined, { timeoutMs: 0 })));
}
