ALTER TABLE "ethics_policies" ADD COLUMN "rules" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "diary_entries" ADD COLUMN "source" text DEFAULT 'agent' NOT NULL;--> statement-breakpoint
ALTER TABLE "diary_entries" ADD CONSTRAINT "diary_entries_source_check" CHECK ("source" in ('user', 'agent', 'llm:task', 'peer', 'system', 'oversight', 'human'));