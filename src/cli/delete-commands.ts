/**
 * `tributary <type> delete`: workflow, connector, api-spec, data-model and field, through
 * the JSON:API as a service account (DELETE, docs/api.md "Deleting"); `widget delete` is
 * with the other widget commands, on the admin API. A data model goes with its facts, so
 * its delete asks for --yes first.
 */
import { Command, CommanderError } from 'commander';
import { isUuid } from '../ids.ts';
import { AdminApiError, EXIT_USAGE, commandRunner } from './admin-client.ts';
import { all, apiClientOf, type ApiClient, type Resource } from './api-client.ts';
import { mustFindWorkflow } from './workflow-commands.ts';

type Io = { out: (s: string) => void; err: (s: string) => void };

/** The command group `name`, as another module registered it, or a new one. */
function group(program: Command, name: string, description: string): Command {
  return program.commands.find((c) => c.name() === name) ?? program.command(name).description(description);
}

async function remove(client: ApiClient, collection: string, id: string): Promise<void> {
  // The client sends one Idempotency-Key per call: a retried DELETE replays its 204.
  await client.request('DELETE', `/${collection}/${encodeURIComponent(id)}`);
}

/** A data model by id or slug. */
async function findModel(client: ApiClient, slugOrId: string): Promise<Resource> {
  const found = isUuid(slugOrId) ? [] : await all(client, 'data_models', { filter: { slug: slugOrId } });
  if (found[0]) return found[0];
  if (!isUuid(slugOrId)) throw new AdminApiError(`no data model with the slug ${JSON.stringify(slugOrId)}`, 404, 'not_found');
  return (await client.get('data_models', slugOrId)).data as unknown as Resource;
}

export function registerDeleteCommands(program: Command, io: Io): void {
  const json = () => program.opts().json === true;
  const client = () => apiClientOf(program);
  const run = commandRunner(json, io);
  const done = (type: string, id: string, line: string) => io.out(json() ? `${JSON.stringify({ deleted: { type, id } })}\n` : `${line}\n`);

  group(program, 'workflow', 'workflows')
    .command('delete')
    .description('delete a workflow: its triggers answer 404 at once and its schedules stop; its runs stay readable')
    .argument('<id-or-name>', 'workflow id or name')
    .action((idOrName: string) =>
      run(async () => {
        const c = client();
        const wf = await mustFindWorkflow(c, idOrName);
        await remove(c, 'workflows', wf.id);
        done('workflow', wf.id, `workflow ${JSON.stringify(wf.attributes.name)} deleted (id ${wf.id}); its runs stay readable`);
      }),
    );

  group(program, 'connector', 'external connectors')
    .command('delete')
    .description('delete an external connector (an admin or owner); refused while a workflow uses it')
    .argument('<connector-id>', 'connector id')
    .action((id: string) =>
      run(async () => {
        await remove(client(), 'external_connectors', id);
        done('external_connector', id, `connector ${id} deleted; its API specifications stay, detached`);
      }),
    );

  group(program, 'api-spec', 'API specifications')
    .command('delete')
    .description('delete an API specification; refused while it is the last one of a connector a workflow calls by operation_ref')
    .argument('<spec-id>', 'API specification id')
    .action((id: string) =>
      run(async () => {
        await remove(client(), 'api_specs', id);
        done('api_spec', id, `API specification ${id} deleted`);
      }),
    );

  group(program, 'data-model', 'data models')
    .command('delete')
    .description('delete a data model with all its facts, fields and dashboard widgets (asks for --yes); refused while a workflow writes to it')
    .argument('<slug-or-id>', 'data model slug or id')
    .option('--yes', 'delete its facts too, for good')
    .action((slugOrId: string, o: { yes?: boolean }) =>
      run(async () => {
        if (o.yes !== true) {
          const message = `deleting the data model ${JSON.stringify(slugOrId)} deletes all its facts, its fields and its dashboard widgets too, for good: pass --yes to go ahead`;
          if (json()) io.out(`${JSON.stringify({ error: message, status: null, code: 'confirmation_required' })}\n`);
          else io.err(`error: ${message}\n`);
          throw new CommanderError(EXIT_USAGE, 'tributary.confirmationRequired', message);
        }
        const c = client();
        const model = await findModel(c, slugOrId);
        await remove(c, 'data_models', model.id);
        done('data_model', model.id, `data model ${JSON.stringify(model.attributes.slug)} deleted (id ${model.id}) with its facts, fields and widgets`);
      }),
    );

  group(program, 'field', 'data model fields')
    .command('delete')
    .description('delete a field of a data model: by id, or by name with --model; refused while a workflow maps a value to it')
    .argument('<id-or-name>', 'field id, or its name with --model')
    .option('--model <slug-or-id>', 'the data model whose field is named')
    .action((idOrName: string, o: { model?: string }) =>
      run(async () => {
        const c = client();
        let id = idOrName;
        if (o.model !== undefined) {
          const model = await findModel(c, o.model);
          const fields = await all(c, 'data_model_fields', { filter: { data_model_id: model.id, name: idOrName } });
          if (!fields[0]) throw new AdminApiError(`the data model ${JSON.stringify(o.model)} has no field ${JSON.stringify(idOrName)}`, 404, 'not_found');
          id = fields[0].id;
        }
        await remove(c, 'data_model_fields', id);
        done('data_model_field', id, `field ${o.model === undefined ? id : JSON.stringify(idOrName)} deleted (id ${id})`);
      }),
    );
}
