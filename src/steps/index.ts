/**
 * The step types, by type: a new step type is one file here and one line below
 * (docs/architecture.md, "Adding a step type").
 */
import type { WorkflowStep } from '../db/tables.ts';
import { condition } from './condition.ts';
import { forEach } from './for-each.ts';
import { delay } from './delay.ts';
import { httpRequest } from './http-request.ts';
import { setState } from './set-state.ts';
import type { StepType } from './step.ts';
import { switchStep } from './switch.ts';
import { transform } from './transform.ts';
import { waitForDelivery } from './wait-for-delivery.ts';
import { waitUntilStep } from './wait-until.ts';
import { writeFact } from './write-fact.ts';

/** Each stored step's config, by its type. */
type Configs = { [S in WorkflowStep as S['type']]: S['config'] };

export const STEP_TYPES_BY_TYPE: { readonly [T in keyof Configs]: StepType<Configs[T]> } = {
  transform,
  condition,
  write_fact: writeFact,
  http_request: httpRequest,
  switch: switchStep,
  for_each: forEach,
  delay,
  wait_until: waitUntilStep,
  wait_for_delivery: waitForDelivery,
  set_state: setState,
};

export const STEP_TYPES = Object.keys(STEP_TYPES_BY_TYPE) as Array<keyof Configs>;

export const isStepType = (t: unknown): t is WorkflowStep['type'] => typeof t === 'string' && Object.hasOwn(STEP_TYPES_BY_TYPE, t);

/** A stored step's type, or undefined for one this release does not know (saved by a later one). */
export function stepTypeOf<S extends WorkflowStep>(step: S): StepType<S['config']> | undefined {
  return isStepType(step.type) ? (STEP_TYPES_BY_TYPE[step.type] as StepType<S['config']>) : undefined;
}
