/**
 * The closed sets of LLM providers and roles, shared by the per-agent registry (llm.ts) and the
 * deployment's model catalogue (models.ts). A module of its own because llm.ts references the
 * catalogue: the catalogue cannot import llm.ts back without a load-order cycle.
 */
export const llmProviders = ['openai', 'anthropic', 'local', 'scripted'] as const;
/** `task`: auxiliary loops and one-shot `llm_task` calls; `embedder` is not a chat role. */
export const llmRoles = ['agent', 'oversight', 'validator', 'emotion', 'novelty', 'task', 'embedder'] as const;
