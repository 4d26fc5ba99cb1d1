/**
 * The difference between the steps of two versions: each version written as YAML-like text,
 * compared line by line with a longest common subsequence; a string of several lines (an
 * expression) is written as a block, a line each. Added and removed lines carry
 * `+` and `−` in their text, so the meaning never rests on colour alone.
 */
import type { WorkflowVersion } from './workflow-versions.ts';
import { Empty } from '../ui/index.tsx';
import { lineDiff, stepsText } from './workflow-diff-text.ts';

export { parseDiff } from './workflow-diff-text.ts';

const SIGN = { ' ': ' ', '+': '+', '-': '−' } as const;
const CLASS = { ' ': 'same', '+': 'added', '-': 'removed' } as const;

export function VersionDiff(props: { from: WorkflowVersion; to: WorkflowVersion }) {
  const lines = lineDiff(stepsText(props.from.steps), stepsText(props.to.steps));
  const added = lines.filter((l) => l.op === '+').length;
  const removed = lines.filter((l) => l.op === '-').length;
  return (
    <div class="wf-diff">
      <p>
        From version {props.from.version} to version {props.to.version}: {added} {added === 1 ? 'line' : 'lines'} added (+), {removed}{' '}
        {removed === 1 ? 'line' : 'lines'} removed (−).
      </p>
      {added + removed === 0 ? (
        <Empty>The two versions have the same steps.</Empty>
      ) : (
        <pre class="diff" tabIndex={0} aria-label={`Steps, version ${props.from.version} to ${props.to.version}`}>
          {lines.map((l) => (
            <span class={`diff-line ${CLASS[l.op]}`}>
              {SIGN[l.op]} {l.text}
              {'\n'}
            </span>
          ))}
        </pre>
      )}
    </div>
  );
}
