/**
 * Workflows and data models from files, through the JSON:API as a service account:
 * `workflow apply|get|list|test` and `data-model apply`. Apply is by name (slug for a data
 * model): it creates, updates, or, when nothing differs, does not save at all.
 */
import fs from 'node:fs';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import YAML from 'yaml';
import { isUuid } from '../ids.ts';
import { AdminApiError, CommandFailure, EXIT_FAILURE, reportFailure } from './admin-client.ts';
import type { CreateData, TestRunAttributes, UpdateData } from '../../packages/client/src/index.ts';
import { all, apiClientOf, asResource, type ApiClient, type Resource } from './api-client.ts';
import { renderTable } from './admin-commands.ts';
import {
  changedMembers,
  compareWorkflows,
  fileMemberOfPointer,
  parseDocumentText,
  FileError,
  readDataModelFile,
  readWorkflowFile,
  renderYaml,
  workflowFileDocument,
  workflowOfResource,
  type WorkflowFile,
} from './workflow-files.ts';
import { parseWorkflowText, WORKFLOW_FILE_HEADER, WorkflowFileProblem } from '../workflows/file.ts';

type Io = { out: (s: string) => void; err: (s: string) => void };
type Obj = Record<string, unknown>;

function readFileText(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CommandFailure(`cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? 'unreadable')}`, 'file_unreadable');
  }
}

function versionArg(value: string): number {
  if (!/^\d{1,9}$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('expected a version number (1 or more)');
  return Number(value);
}

const compact = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v));

/** The workflow an argument names: an id, or the name of exactly one workflow. */
export async function findWorkflow(client: ApiClient, idOrName: string): Promise<Resource | undefined> {
  if (isUuid(idOrName)) {
    try {
      return asResource((await client.get('workflows', idOrName)).data);
    } catch (err) {
      if (err instanceof AdminApiError && err.status === 404) return undefined;
      throw err;
    }
  }
  const found = await all(client, 'workflows', { filter: { name: String(idOrName).trim() } });
  if (found.length > 1)
    throw new CommandFailure(
      `${found.length} workflows are named ${JSON.stringify(idOrName)} (${found.map((w) => w.id).join(', ')}): name one by its id`,
      'ambiguous_name',
    );
  return found[0];
}

export async function mustFindWorkflow(client: ApiClient, idOrName: string): Promise<Resource> {
  const wf = await findWorkflow(client, idOrName);
  if (!wf) throw new AdminApiError(`no workflow ${isUuid(idOrName) ? 'with the id' : 'named'} ${JSON.stringify(idOrName)}`, 404, 'not_found');
  return wf;
}

/** A save's error, pointing into the file rather than the request the CLI made of it. */
function inFileTerms(err: unknown, file: string, w: WorkflowFile): unknown {
  if (!(err instanceof AdminApiError)) return err;
  if (err.code === 'stale_lock_version') {
    return new AdminApiError(
      `the workflow ${JSON.stringify(w.name)} was saved by someone else since ${file}'s lock_version was read: run \`tributary workflow get ${JSON.stringify(w.name)} --yaml\` to see the current one, merge your change, and apply again`,
      err.status,
      err.code,
    );
  }
  const pointer = typeof err.source?.pointer === 'string' ? err.source.pointer : undefined;
  const member = pointer === undefined ? undefined : fileMemberOfPointer(pointer, w);
  if (member === undefined) return err;
  return new AdminApiError(`${file} at ${member}: ${err.message}`, err.status, err.code, { member });
}

/** A test run's error about the file it was sent, as `FILE at member (line L, column C): problem`. */
function inFileText(err: unknown, file: string): unknown {
  if (!(err instanceof AdminApiError) || err.source?.pointer !== '/data/attributes/workflow_file') return err;
  const meta = err.meta ?? {};
  const member = typeof meta.member === 'string' && meta.member !== '' ? ` at ${meta.member}` : '';
  const where = typeof meta.line === 'number' ? ` (line ${meta.line}, column ${compact(meta.column)})` : '';
  return new AdminApiError(`${file}${member}${where}: ${err.message}`, err.status, err.code, { member: meta.member, line: meta.line });
}

/**
 * One `--header 'Name: value'` of a test run, added to the ones before (repeatable, as curl's -H).
 * The same name twice is refused: a delivery's header holds one value here.
 */
export function headerArg(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const colon = value.indexOf(':');
  const name = colon < 0 ? '' : value.slice(0, colon).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new InvalidArgumentError("expected 'Name: value', e.g. 'X-GitHub-Event: push'");
  if (Object.keys(previous).some((n) => n.toLowerCase() === name.toLowerCase())) throw new InvalidArgumentError(`the header ${name} is given twice`);
  return { ...previous, [name]: value.slice(colon + 1).trim() };
}

/** One test-run answer for people: the run (of `file`, when an unsaved file was tested), then one block per step. */
export function renderTestRun(attrs: Obj, file?: string): string {
  const lines: string[] = [];
  const what =
    attrs.workflow_version === null || attrs.workflow_version === undefined
      ? `test run of ${file ?? 'the unsaved file'}${attrs.workflow_id ? ` (unsaved, in the place of workflow ${compact(attrs.workflow_id)})` : ' (unsaved, a new workflow)'}`
      : `test run of workflow ${compact(attrs.workflow_id)} version ${compact(attrs.workflow_version)}`;
  lines.push(`${what}: ${compact(attrs.status)}` + `${attrs.outcome ? ` (outcome ${compact(attrs.outcome)})` : ''}; nothing was stored`);
  if (attrs.error !== null && attrs.error !== undefined) lines.push(`error: ${compact(attrs.error)}`);
  lines.push(`facts it would write: ${typeof attrs.facts_would_write === 'number' ? attrs.facts_would_write : 0}`);
  const steps = Array.isArray(attrs.steps) ? (attrs.steps as Obj[]) : [];
  steps.forEach((s, i) => {
    lines.push('');
    lines.push(`${i + 1}. ${compact(s.key)} (${compact(s.type)}): ${compact(s.status)}${s.reason ? `: ${compact(s.reason)}` : ''}`);
    if (s.value !== undefined) lines.push(`   value: ${compact(s.value)}`);
    if (s.error !== null && s.error !== undefined) lines.push(`   error: ${compact(s.error)}`);
    else if (s.output !== null && s.output !== undefined) lines.push(`   output: ${JSON.stringify(s.output)}`);
    if (Array.isArray(s.facts) && s.facts.length > 0) {
      lines.push('   would write:');
      for (const f of s.facts) lines.push(`     ${JSON.stringify(f)}`);
    }
    if (Array.isArray(s.problems) && s.problems.length > 0) {
      lines.push('   problems:');
      for (const p of s.problems as Obj[])
        lines.push(`     ${p.item !== undefined ? `item ${compact(p.item)} ` : ''}${compact(p.pointer) || '/'}: ${compact(p.detail)}`);
    }
    const req = s.request as Obj | undefined | null;
    if (req) {
      lines.push(`   request: ${compact(req.method)} ${compact(req.url)}`);
      if (req.headers && typeof req.headers === 'object') for (const [k, v] of Object.entries(req.headers as Obj)) lines.push(`     ${k}: ${compact(v)}`);
      if (req.body !== undefined && req.body !== null) lines.push(`     body: ${compact(req.body)}`);
    }
    if (s.response !== undefined && s.response !== null) lines.push(`   response: ${JSON.stringify(s.response)}`);
  });
  return `${lines.join('\n')}\n`;
}

export function registerWorkflowCommands(program: Command, io: Io): void {
  const json = () => program.opts().json === true;
  const client = () => apiClientOf(program);
  const run = async (work: (asJson: boolean) => Promise<void>) => {
    const asJson = json();
    try {
      await work(asJson);
    } catch (err) {
      reportFailure(err, asJson, io);
    }
  };

  const workflow = program.command('workflow').description('workflows as files, through the JSON:API as a service account (docs/cli.md)');

  workflow
    .command('apply')
    .description('create or update the workflow a file describes (by its name); saves nothing when nothing differs')
    .requiredOption('-f, --file <file>', 'the workflow file, YAML or JSON')
    .action((o: { file: string }) =>
      run(async (asJson) => {
        const text = readFileText(o.file);
        const wanted = readWorkflowFile(o.file, parseDocumentText(o.file, text));
        const c = client();
        const existing = await findWorkflow(c, wanted.name);
        const current = existing ? workflowOfResource(existing.attributes) : undefined;
        const needsAccount = wanted.triggers.some((t) => t.type === 'webhook' && t.members.service_account_id === undefined);
        const me = await c.identity();
        if (needsAccount) {
          for (const t of wanted.triggers)
            if (t.type === 'webhook' && t.members.service_account_id === undefined) t.members.service_account_id = me.credentialId;
        }
        const webhookUrl = (token: string) => `${c.url}/api/v1/webhooks/${token}`;
        let action: 'created' | 'updated' | 'unchanged';
        let saved: Resource;
        let tokens: Record<string, string> = {};
        let relayUrl: string | undefined;
        const diff = current ? compareWorkflows(wanted, current) : { stepsDiffer: true, anyDiffers: true };
        if (existing && !diff.anyDiffers) {
          action = 'unchanged';
          saved = existing;
        } else {
          const kept = new Map(
            (Array.isArray(existing?.attributes.triggers) ? (existing.attributes.triggers as Obj[]) : []).map((t) => [`${t.type}:${t.key}`, t.id]),
          );
          const attributes: Obj = {
            // A change of steps is a new version: runs made so far keep the steps they ran.
            is_new_version: existing !== undefined && diff.stepsDiffer,
            organization_id: me.organizationId,
            workflow_id: existing?.id ?? null,
            // The file's lock_version (from `get --yaml`) refuses a save over a change made since;
            // without one, the version read just now narrows the race to this command.
            lock_version: existing ? (wanted.lock_version ?? current!.lock_version) : null,
            wf_params: { name: wanted.name, description: wanted.description, is_active: wanted.is_active, concurrency: wanted.concurrency },
            step_params: wanted.steps.map((s) => ({ key: s.key, type: s.type, config: s.config })),
            on_failure_params: wanted.on_failure.map((s) => ({ key: s.key, type: s.type, config: s.config })),
            trigger_params: wanted.triggers.map((t) => {
              const id = kept.get(`${t.type}:${t.key}`);
              return { key: t.key, type: t.type, ...t.members, ...(id ? { id } : {}) };
            }),
          };
          let doc: { data: unknown; meta?: Obj };
          try {
            doc = (await c.request('POST', '/workflows/save_builder_state', { data: { type: 'workflow_builder_state', attributes } })) as typeof doc;
          } catch (err) {
            throw inFileTerms(err, o.file, wanted);
          }
          saved = asResource(doc.data);
          tokens = (doc.meta?.trigger_tokens as Record<string, string> | undefined) ?? {};
          relayUrl = typeof doc.meta?.relay_url === 'string' ? doc.meta.relay_url : undefined;
          action = existing ? 'updated' : 'created';
        }
        // A file read with `get --yaml` goes on naming what it was saved as, so the next edit applies.
        const newLock = saved.attributes.lock_version as string;
        let fileUpdated = false;
        if (wanted.lock_version !== null && wanted.lock_version !== newLock && text.split(wanted.lock_version).length === 2) {
          // Unquoted in YAML, a lock_version of digits (and an e) would read back as a number.
          const at = text.indexOf(wanted.lock_version);
          const quoted = /["']/.test(text[at - 1] ?? '');
          const plain = quoted || typeof YAML.parse(newLock) === 'string';
          fs.writeFileSync(o.file, text.replace(wanted.lock_version, plain ? newLock : JSON.stringify(newLock)));
          fileUpdated = true;
        }
        if (asJson) {
          const urls = Object.fromEntries(Object.entries(tokens).map(([k, t]) => [k, webhookUrl(t)]));
          const relayed =
            relayUrl === undefined ? {} : { relay_urls: Object.fromEntries(Object.entries(tokens).map(([k, t]) => [k, `${relayUrl}/hooks/${t}`])) };
          io.out(
            `${JSON.stringify({ data: saved, meta: { action, trigger_tokens: tokens, webhook_urls: urls, ...relayed, file_lock_version_updated: fileUpdated } })}\n`,
          );
          return;
        }
        const a = saved.attributes;
        io.out(`workflow ${JSON.stringify(a.name)} ${action}: id ${saved.id}, version ${compact(a.version)}, lock_version ${newLock}\n`);
        for (const t of (a.triggers as Obj[]) ?? []) {
          const token = tokens[String(t.key)];
          if (token) {
            io.out(`trigger ${compact(t.key)}: new token, shown only this once (keep it like a password)\n`);
            io.out(`  ${token}\n  deliver to: POST ${webhookUrl(token)}\n`);
            // A provider that cannot send a bearer token posts to the relay instead (docs/webhooks.md, "The relay").
            if (relayUrl !== undefined) io.out(`  from a provider, through the relay: POST ${relayUrl}/hooks/${token}\n`);
          } else if (t.type === 'webhook') io.out(`trigger ${compact(t.key)}: webhook, token unchanged\n`);
          else io.out(`trigger ${compact(t.key)}: schedule ${compact(t.cron)} (${compact(t.timezone)})\n`);
        }
        if (fileUpdated) io.out(`${o.file}: lock_version is now ${newLock}\n`);
      }),
    );

  workflow
    .command('get')
    .description('write a workflow as a file (YAML, or JSON with -o FILE.json); --json prints the resource')
    .argument('<id-or-name>', 'workflow id or name')
    .option('--yaml', 'the workflow file format (the default)')
    .option('-o, --output <file>', 'write the file here instead of stdout')
    .action((idOrName: string, o: { yaml?: boolean; output?: string }) =>
      run(async (asJson) => {
        const c = client();
        const wf = await mustFindWorkflow(c, idOrName);
        if (asJson && !o.output) {
          io.out(`${JSON.stringify(wf)}\n`);
          return;
        }
        const me = await c.identity();
        const doc = workflowFileDocument(workflowOfResource(wf.attributes), me.credentialId);
        const header = WORKFLOW_FILE_HEADER;
        const out = o.output?.toLowerCase().endsWith('.json') ? `${JSON.stringify(doc, null, 2)}\n` : renderYaml(doc, header);
        if (o.output) {
          fs.writeFileSync(o.output, out);
          io.out(asJson ? `${JSON.stringify({ written: o.output, id: wf.id, lock_version: wf.attributes.lock_version })}\n` : `wrote ${o.output}\n`);
        } else io.out(out);
      }),
    );

  workflow
    .command('list')
    .description('list the workflows of the account’s workspace, by name')
    .action(() =>
      run(async (asJson) => {
        const workflows = await all(client(), 'workflows', { sort: 'name' });
        if (asJson) io.out(`${JSON.stringify({ data: workflows })}\n`);
        else
          io.out(
            renderTable(
              workflows.map((w) => ({ id: w.id, ...w.attributes, triggers: ((w.attributes.triggers as Obj[]) ?? []).map((t) => t.key) })),
              ['id', 'name', 'version', 'is_active', 'triggers', 'lock_version', 'updated_at'],
            ),
          );
      }),
    );

  workflow
    .command('test')
    .description('run a workflow on a sample payload without storing or sending anything; -f tests a file without saving it; exits 1 when the test run failed')
    .argument('[id-or-name]', 'workflow id or name (with -f: default, the workflow the file names, if it is saved)')
    .option('-f, --file <file>', 'test this workflow file (YAML or JSON, as `workflow get --yaml` writes it) instead of a saved version; nothing is saved')
    .requiredOption('--payload <file>', 'the sample payload, a JSON (or YAML) file')
    .option('--version <n>', 'test this saved version (default: the current one)', versionArg)
    .option('--header <header>', "a header of the sample delivery, 'Name: value' (repeatable); expressions see it in delivery.headers", headerArg)
    .option('--delivery-id <id>', "the sample delivery's id, delivery.id (default: its delivery-id header's value)")
    .addOption(new Option('--call <mode>', 'safe: perform http_request steps whose method is safe (GET, HEAD, OPTIONS)').choices(['safe']))
    .action(
      (
        idOrName: string | undefined,
        o: { file?: string; payload: string; version?: number; call?: string; header?: Record<string, string>; deliveryId?: string },
      ) =>
        run(async (asJson) => {
          if (idOrName === undefined && o.file === undefined) throw new CommandFailure('name the workflow to test, or give its file with -f FILE', 'usage');
          if (o.file !== undefined && o.version !== undefined) throw new CommandFailure('-f tests the file: --version names a saved version instead', 'usage');
          const payload = parseDocumentText(o.payload, readFileText(o.payload));
          const c = client();
          const attributes: Obj = { payload };
          let workflowId: string | null;
          let file: WorkflowFile | undefined;
          if (o.file !== undefined) {
            const text = readFileText(o.file);
            try {
              file = parseWorkflowText(text).file;
            } catch (err) {
              if (err instanceof WorkflowFileProblem)
                throw new FileError(o.file, err.at, err.problem + (err.position ? ` (line ${err.position.line}, column ${err.position.column})` : ''));
              throw err;
            }
            // The file tested in the place of the workflow it names, when that one is saved: a new one's test run has no workflow id.
            workflowId = idOrName !== undefined ? (await mustFindWorkflow(c, idOrName)).id : ((await findWorkflow(c, file.name))?.id ?? null);
            attributes.workflow_file = text;
          } else workflowId = (await mustFindWorkflow(c, idOrName!)).id;
          if (o.version !== undefined) attributes.version = o.version;
          if (o.call !== undefined) attributes.call = o.call;
          if (o.header !== undefined) attributes.headers = o.header;
          if (o.deliveryId !== undefined) attributes.delivery_id = o.deliveryId;
          let doc;
          try {
            // A test run may call out (--call safe) and take long: no time limit of its own.
            doc = await c.testRun(workflowId, attributes as TestRunAttributes, { timeoutMs: 0 });
          } catch (err) {
            throw o.file === undefined ? err : inFileText(err, o.file);
          }
          const data = asResource(doc.data);
          io.out(asJson ? `${JSON.stringify(data)}\n` : renderTestRun(data.attributes, o.file));
          if (data.attributes.status === 'failed') throw new CommanderError(EXIT_FAILURE, 'tributary.testRunFailed', 'the test run failed');
        }),
    );

  const dataModel = program.commands.find((cmd) => cmd.name() === 'data-model') ?? program.command('data-model').description('data models');
  dataModel
    .command('apply')
    .description('create or update a data model and its fields from a file (by slug), through the JSON:API; fields are never deleted')
    .requiredOption('-f, --file <file>', 'the data model file, YAML or JSON')
    .action((o: { file: string }) =>
      run(async (asJson) => {
        const wanted = readDataModelFile(o.file, parseDocumentText(o.file, readFileText(o.file)));
        const c = client();
        const fileError = (err: unknown, at: Array<string | number>) =>
          err instanceof AdminApiError && err.status === 422
            ? new AdminApiError(`${o.file} at ${at.join('.') || '(top)'}: ${err.message}`, err.status, err.code, { member: at.join('.') })
            : err;
        const found = await all(c, 'data_models', { filter: { slug: wanted.slug } });
        let model = found[0];
        let action: 'created' | 'updated' | 'unchanged' = 'unchanged';
        try {
          if (!model) {
            model = asResource(
              (await c.create('data_models', { type: 'data_model', attributes: { slug: wanted.slug, ...wanted.attributes } } as CreateData<'data_models'>))
                .data,
            );
            action = 'created';
          } else {
            const patch = changedMembers(wanted.attributes, model.attributes);
            if (Object.keys(patch).length > 0) {
              model = asResource((await c.update('data_models', model.id, { type: 'data_model', attributes: patch } as UpdateData<'data_models'>)).data);
              action = 'updated';
            }
          }
        } catch (err) {
          const member = err instanceof AdminApiError && typeof err.source?.pointer === 'string' ? err.source.pointer.split('/').pop()! : '';
          throw fileError(err, member ? [member] : []);
        }
        const existing = new Map(
          (action === 'created' ? [] : await all(c, 'data_model_fields', { filter: { data_model_id: model.id } })).map((f) => [String(f.attributes.name), f]),
        );
        const fields: Record<string, string> = {};
        for (const f of wanted.fields) {
          const have = existing.get(f.name);
          const pointerAt = (err: unknown) => {
            const tail = err instanceof AdminApiError && typeof err.source?.pointer === 'string' ? err.source.pointer.split('/').pop()! : '';
            return tail && tail !== 'name' ? [...f.at, tail] : f.at;
          };
          try {
            if (!have) {
              await c.create('data_model_fields', {
                type: 'data_model_field',
                attributes: { data_model_id: model.id, name: f.name, ...f.attributes },
              } as CreateData<'data_model_fields'>);
              fields[f.name] = 'created';
            } else {
              const patch = changedMembers(f.attributes, have.attributes);
              if (Object.keys(patch).length > 0) {
                await c.update('data_model_fields', have.id, { type: 'data_model_field', attributes: patch } as UpdateData<'data_model_fields'>);
                fields[f.name] = `updated (${Object.keys(patch).join(', ')})`;
              } else fields[f.name] = 'unchanged';
            }
          } catch (err) {
            throw fileError(err, pointerAt(err));
          }
        }
        const notInFile = [...existing.keys()].filter((name) => !wanted.fields.some((f) => f.name === name));
        if (action === 'unchanged' && Object.values(fields).some((v) => v !== 'unchanged')) action = 'updated';
        if (asJson) {
          io.out(`${JSON.stringify({ data: model, meta: { action, fields, not_in_file: notInFile } })}\n`);
          return;
        }
        io.out(`data model ${wanted.slug} ${action}: id ${model.id}\n`);
        for (const [name, what] of Object.entries(fields)) io.out(`field ${name}: ${what}\n`);
        for (const name of notInFile) io.out(`field ${name}: not in the file, kept (apply never deletes a field)\n`);
      }),
    );
}
