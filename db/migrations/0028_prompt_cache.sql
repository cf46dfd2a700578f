ALTER TABLE "llm_calls" ADD COLUMN "cached_prompt_tokens" integer;--> statement-breakpoint
ALTER TABLE "llm_calls" ADD COLUMN "uncached_prompt_tokens" integer;--> statement-breakpoint
ALTER TABLE "llm_registry" ADD COLUMN "cost_per_1k_cached_input" numeric(12, 6);--> statement-breakpoint
ALTER TABLE "models" ADD COLUMN "price_cached_in_per_1m" numeric(12, 6);--> statement-breakpoint
ALTER TABLE "models" ADD CONSTRAINT "models_price_cached_check" CHECK ("price_cached_in_per_1m" >= 0);