/**
 * The writable types and the input schema their POST and PATCH routes check: surface.ts
 * registers their routes with these schemas and openapi.ts describes the same ones.
 */
import type { InputSchema } from '../../input.ts';
import { dataModelInput } from '../../resources/data_models/service.ts';
import { fieldInput } from '../../resources/data_model_fields/service.ts';
import { connectorInput } from '../../resources/external_connectors/service.ts';
import { widgetInput } from '../../resources/dashboard_widgets/service.ts';
import { apiSpecInput } from '../../resources/api_specs/service.ts';

export function writeInputs(apiSpecMaxBytes: number) {
  return {
    data_model: dataModelInput,
    data_model_field: fieldInput,
    external_connector: connectorInput,
    api_spec: apiSpecInput(apiSpecMaxBytes),
    dashboard_widget: widgetInput,
  } satisfies Record<string, InputSchema>;
}
