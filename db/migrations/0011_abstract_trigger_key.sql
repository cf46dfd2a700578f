ALTER TABLE "abstracts" ADD COLUMN "trigger_key" text;--> statement-breakpoint
CREATE UNIQUE INDEX "abstracts_agent_id_trigger_key_uq" ON "abstracts" USING btree ("agent_id","trigger_key");