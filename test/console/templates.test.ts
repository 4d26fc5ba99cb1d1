/**
 * The console's templates (console/src/pages/workflow-templates.ts) are workflow files a save
 * takes: each reads as a file and passes the save's shape and reference-order checks (what
 * needs the workspace, a connector or a data model, is the workspace's to have).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WORKFLOW_TEMPLATES } from '../../console/src/pages/workflow-templates.ts';
import { builderParts, parseWorkflowText, workflowFileDocument, renderYaml } from '../../src/workflows/file.ts';
import { readDefinition } from '../../src/workflows/definition.ts';

const ACCOUNT = '6f9619ff-8b86-4d01-b42d-00cf4fc964ff';

describe('console templates', () => {
  for (const t of WORKFLOW_TEMPLATES) {
    it(`${t.id} reads as a file and passes the save's checks`, () => {
      const { file } = parseWorkflowText(t.yaml);
      const def = readDefinition(builderParts(file, ACCOUNT));
      assert.ok(def.steps.length > 0);
      // What `get --yaml` writes of it reads back the same.
      const again = parseWorkflowText(renderYaml(workflowFileDocument(file, ACCOUNT))).file;
      assert.deepEqual(again.steps, file.steps);
    });
  }

  it('the GitHub router routes on the X-GitHub-Event header with a switch', () => {
    const router = WORKFLOW_TEMPLATES.find((t) => t.id === 'github-router')!;
    const def = readDefinition(builderParts(parseWorkflowText(router.yaml).file, ACCOUNT));
    assert.equal(def.steps[0]!.type, 'switch');
  });
});
