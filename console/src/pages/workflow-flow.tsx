/**
 * A workflow drawn as a flow: its triggers on the left, each leading to the first step, and
 * the steps in their order top to bottom; a condition step branches right to where a false
 * value stops the run. Nested steps (a switch's cases, a for_each's loop, a wait's on-timeout
 * steps) are drawn indented under their step, each list after a branch label
 * (workflow-flow-rows.ts); a wait's box says what it waits for. The SVG is a picture with a title and a description; the ordered list
 * next to it says the same to a screen reader and is where the keyboard selects a step.
 */
import { useState } from 'preact/hooks';
import type { WorkflowStep } from './workflow-versions.ts';
import { Json } from '../ui/index.tsx';
import { flowRows, WAIT_TYPES, type FlowRow } from './workflow-flow-rows.ts';

export interface FlowTrigger {
  key: string;
  type: string;
  cron?: string;
}

const ROW = 76;
const BOX_H = 52;
const TRIGGER_X = 8;
const TRIGGER_W = 180;
const STEP_X = 260;
const STEP_W = 220;
const STOP_X = 540;
const STOP_W = 150;
const TOP = 16;
/** How far right a nested list is drawn, per level. */
const INDENT = 28;
const BRANCH_H = 22;

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

function stepLabel(s: WorkflowStep, i: number): string {
  return `Step ${i + 1}: ${s.key}, ${s.type.replaceAll('_', ' ')}`;
}

function triggerLabel(t: FlowTrigger): string {
  return `Trigger ${t.key}: ${t.type}${t.cron ? ` (${t.cron})` : ''}`;
}

function rowHeight(r: FlowRow): number {
  return r.kind === 'branch' ? BRANCH_H + 8 : ROW;
}

function FlowSvg(props: { steps: WorkflowStep[]; triggers: FlowTrigger[]; selected: number | undefined; onSelect: (i: number) => void; version: number }) {
  const { steps, triggers } = props;
  const rows = flowRows(steps);
  const tops: number[] = [];
  let at = TOP;
  for (const r of rows) {
    tops.push(at);
    at += rowHeight(r);
  }
  const maxDepth = Math.max(0, ...rows.map((r) => r.depth));
  const height = Math.max(at - (ROW - BOX_H), TOP * 2 + Math.max(triggers.length, 1) * ROW - (ROW - BOX_H)) + TOP;
  const hasCondition = rows.some((r) => r.kind === 'step' && r.step.type === 'condition');
  const width = Math.max(hasCondition ? STOP_X + STOP_W + 8 : STEP_X + STEP_W + 8, STEP_X + STEP_W + maxDepth * INDENT + 8);
  const y = (i: number) => TOP + i * ROW;
  const firstMid = TOP + BOX_H / 2;
  const stepRows = rows.filter((r): r is Extract<FlowRow, { kind: 'step' }> => r.kind === 'step');
  const description =
    `${triggers.length} ${triggers.length === 1 ? 'trigger' : 'triggers'} (${triggers.map((t) => `${t.key}, ${t.type}`).join('; ') || 'none'}) ` +
    `lead to ${steps.length} ${steps.length === 1 ? 'step' : 'steps'} run in order: ` +
    steps.map((s) => `${s.key} (${s.type})${s.type === 'condition' ? ', where a false value stops the run' : ''}`).join(', then ') +
    '.' +
    (stepRows.length > steps.length
      ? ` Nested: ${stepRows
          .filter((r) => r.depth > 0)
          .map((r) => r.step.key)
          .join(', ')}.`
      : '');
  let stepIndex = -1;
  return (
    <svg
      class="wf-flow"
      role="img"
      aria-labelledby="wf-flow-title wf-flow-desc"
      viewBox={`0 0 ${width} ${height}`}
      width={width}
      height={height}
      xmlns="http://www.w3.org/2000/svg"
    >
      <title id="wf-flow-title">Flow of version {props.version}</title>
      <desc id="wf-flow-desc">{description}</desc>
      <defs>
        <marker id="wf-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
          <path d="M 0 0 L 10 5 L 0 10 z" class="wf-arrow-head" />
        </marker>
      </defs>
      {triggers.map((t, i) => {
        const mid = y(i) + BOX_H / 2;
        return (
          <g class={`wf-node wf-trigger ${t.type}`}>
            <rect x={TRIGGER_X} y={y(i)} width={TRIGGER_W} height={BOX_H} rx={BOX_H / 2} />
            <text x={TRIGGER_X + 18} y={y(i) + 21} class="wf-key">
              {cut(t.key, 18)}
            </text>
            <text x={TRIGGER_X + 18} y={y(i) + 39} class="wf-type">
              {t.type === 'schedule' && t.cron ? cut(`schedule ${t.cron}`, 22) : t.type}
            </text>
            {steps.length > 0 && (
              <path
                class="wf-edge"
                d={`M ${TRIGGER_X + TRIGGER_W} ${mid} C ${STEP_X - 30} ${mid}, ${TRIGGER_X + TRIGGER_W + 30} ${firstMid}, ${STEP_X - 2} ${firstMid}`}
                marker-end="url(#wf-arrow)"
              />
            )}
          </g>
        );
      })}
      {rows.map((r, ri) => {
        const top = tops[ri]!;
        const x = STEP_X + r.depth * INDENT;
        const w = STEP_W;
        const last = ri === rows.length - 1;
        const next = tops[ri + 1];
        if (r.kind === 'branch')
          return (
            <g class="wf-branch-row">
              <path class="wf-edge branch" d={`M ${x - INDENT / 2} ${top - 6} L ${x - INDENT / 2} ${top + BRANCH_H / 2} L ${x - 2} ${top + BRANCH_H / 2}`} />
              <text x={x + 4} y={top + BRANCH_H / 2 + 4} class="wf-branch">
                {cut(r.label, 44)}
              </text>
            </g>
          );
        stepIndex++;
        const i = stepIndex;
        const s = r.step;
        const mid = top + BOX_H / 2;
        const selected = props.selected === i;
        const wait = (WAIT_TYPES as readonly string[]).includes(s.type);
        return (
          <g
            class={`wf-node wf-step ${s.type}${wait ? ' wf-wait' : ''}${r.depth > 0 ? ' nested' : ''}${selected ? ' selected' : ''}`}
            onClick={() => props.onSelect(i)}
          >
            <rect x={x} y={top} width={w} height={BOX_H} rx={s.type === 'condition' ? 14 : wait ? BOX_H / 2 : 4} />
            <text x={x + 12} y={top + 21} class="wf-key">
              {cut(`${r.depth === 0 ? `${steps.indexOf(s as WorkflowStep) + 1}. ` : ''}${s.key}`, 26)}
            </text>
            <text x={x + 12} y={top + 39} class="wf-type">
              {cut(r.note && (wait || s.type === 'for_each') ? `${s.type.replaceAll('_', ' ')}: ${r.note}` : s.type.replaceAll('_', ' '), 34)}
            </text>
            {!last && next !== undefined && <path class="wf-edge" d={`M ${x + w / 2} ${top + BOX_H} L ${x + w / 2} ${next - 2}`} marker-end="url(#wf-arrow)" />}
            {s.type === 'condition' && !last && (
              <text x={x + w / 2 + 6} y={top + BOX_H + 16} class="wf-branch">
                true
              </text>
            )}
            {s.type === 'condition' && (
              <g class="wf-stop">
                <path class="wf-edge false" d={`M ${x + w} ${mid} L ${STOP_X - 2} ${mid}`} marker-end="url(#wf-arrow)" />
                <text x={x + w + 10} y={mid - 6} class="wf-branch">
                  false
                </text>
                <rect x={STOP_X} y={top} width={STOP_W} height={BOX_H} rx={4} />
                <text x={STOP_X + 10} y={top + 21} class="wf-key">
                  run stops
                </text>
                <text x={STOP_X + 10} y={top + 39} class="wf-type">
                  later steps skipped
                </text>
              </g>
            )}
          </g>
        );
      })}
    </svg>
  );
}

/** The flow of one version: the picture, the same as a list, and the selected step's config. */
export function Flow(props: { steps: WorkflowStep[]; triggers: FlowTrigger[]; version: number }) {
  const [selected, setSelected] = useState<number | undefined>(undefined);
  const all = flowRows(props.steps);
  const stepRows = all.filter((r): r is Extract<FlowRow, { kind: 'step' }> => r.kind === 'step');
  const step = selected === undefined ? undefined : stepRows[selected]?.step;
  return (
    <div class="wf-flow-wrap">
      <div class="wf-flow-scroll">
        <FlowSvg steps={props.steps} triggers={props.triggers} selected={selected} onSelect={setSelected} version={props.version} />
      </div>
      <div class="grid-2">
        <div>
          <h3>In order</h3>
          <ol class="wf-flow-list" aria-label={`Flow of version ${props.version}, in order`}>
            {props.triggers.map((t) => (
              <li class="wf-flow-trigger">{triggerLabel(t)}</li>
            ))}
            {all.map((r) => {
              if (r.kind === 'branch')
                return (
                  <li class="wf-flow-branch">
                    <span class={`muted small depth-${Math.min(r.depth, 4)}`}>{r.label}</span>
                  </li>
                );
              const i = stepRows.indexOf(r);
              const s = r.step;
              return (
                <li class={`depth-${Math.min(r.depth, 4)}`}>
                  <button type="button" class="link" aria-pressed={selected === i} onClick={() => setSelected(i)} onFocus={() => setSelected(i)}>
                    {r.depth === 0 ? stepLabel(s as WorkflowStep, props.steps.indexOf(s as WorkflowStep)) : `${s.key}, ${s.type.replaceAll('_', ' ')} (nested)`}
                  </button>
                  {r.note && <span class="muted small"> — {r.note}</span>}
                </li>
              );
            })}
          </ol>
          {props.steps.length === 0 && <p class="muted">This version has no steps.</p>}
        </div>
        <div aria-live="polite">
          {step ? (
            <>
              <h3>
                Step {step.key} ({step.type.replaceAll('_', ' ')})
              </h3>
              <Json value={step.config ?? {}} label={`Config of step ${step.key}`} />
            </>
          ) : (
            <p class="muted">Select a step (click its box, or focus it in the list) to see its config.</p>
          )}
        </div>
      </div>
    </div>
  );
}
