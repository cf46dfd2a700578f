ALTER TABLE "ethics_policies" ADD COLUMN "forbids" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "llm_recent_responses" ADD COLUMN "reflexes" jsonb;