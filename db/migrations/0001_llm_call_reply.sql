ALTER TABLE "llm_calls" DROP CONSTRAINT "llm_calls_role_check";--> statement-breakpoint
ALTER TABLE "llm_registry" DROP CONSTRAINT "llm_registry_role_check";--> statement-breakpoint
ALTER TABLE "llm_calls" ADD COLUMN "request_key" text;--> statement-breakpoint
ALTER TABLE "llm_calls" ADD COLUMN "reply" text;--> statement-breakpoint
CREATE INDEX "llm_calls_request_key_idx" ON "llm_calls" USING btree ("request_key");--> statement-breakpoint
CREATE UNIQUE INDEX "llm_calls_request_key_ok_uq" ON "llm_calls" USING btree ("request_key") WHERE "ok";--> statement-breakpoint
ALTER TABLE "llm_calls" ADD CONSTRAINT "llm_calls_role_check" CHECK ("role" in ('agent', 'oversight', 'validator', 'emotion', 'novelty', 'task', 'embedder'));--> statement-breakpoint
ALTER TABLE "llm_registry" ADD CONSTRAINT "llm_registry_role_check" CHECK ("role" in ('agent', 'oversight', 'validator', 'emotion', 'novelty', 'task', 'embedder'));