DROP INDEX "nerve_rule_events_decision_key_idx";--> statement-breakpoint
ALTER TABLE "nerve_rule_events" ADD COLUMN "decision_id" bigint;--> statement-breakpoint
ALTER TABLE "nerve_rule_events" ADD CONSTRAINT "nerve_rule_events_undoes_nerve_rule_events_id_fk" FOREIGN KEY ("undoes") REFERENCES "public"."nerve_rule_events"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "nerve_rule_events" ADD CONSTRAINT "nerve_rule_events_decision_id_nerve_decisions_id_fk" FOREIGN KEY ("decision_id") REFERENCES "public"."nerve_decisions"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "nerve_rule_events_decision_id_idx" ON "nerve_rule_events" USING btree ("decision_id");--> statement-breakpoint
CREATE INDEX "nerve_rule_events_undoes_idx" ON "nerve_rule_events" USING btree ("undoes");--> statement-breakpoint
ALTER TABLE "nerve_rule_events" DROP COLUMN "decision_key";