/**
 * API keys come from the environment object the composition root passes in, by the variable
 * NAME stored in the registry row (`api_key_env`); the key itself is never stored or logged.
 */
import type { LlmRegistryEntry } from '../../../db/schema/llm.js';
import { ErrorType, nonRetryable } from '../../errors.js';

export type EnvSource = Readonly<Record<string, string | undefined>>;

/** The row's key, `undefined` when the row names no variable; throws when the named one is unset. */
export function resolveApiKey(row: LlmRegistryEntry, env: EnvSource): string | undefined {
  if (!row.apiKeyEnv) return undefined;
  const key = env[row.apiKeyEnv];
  if (!key)
    throw nonRetryable(
      ErrorType.InvalidInput,
      `environment variable ${row.apiKeyEnv} (api_key_env of llm_registry #${row.id}) is not set`,
    );
  return key;
}
