-- Custom migration (drizzle-kit generate --custom): partnership_messages is append-only (SPEC §4:
-- the conversation between the tiers is auditable). Direct UPDATE / DELETE / TRUNCATE are refused;
-- only the foreign keys' own actions pass (an agent's deletion cascades, an escalation's deletion
-- sets escalation_id null): they run inside the referential trigger, so pg_trigger_depth() > 1.
CREATE OR REPLACE FUNCTION "partnership_messages_append_only"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'TRUNCATE' AND pg_trigger_depth() > 1 THEN
    RETURN COALESCE(NEW, OLD);
  END IF;
  RAISE EXCEPTION 'partnership_messages is append-only: % refused', TG_OP USING ERRCODE = 'P0001', HINT = 'insert a new message instead';
END;
$$;--> statement-breakpoint
CREATE TRIGGER "partnership_messages_append_only" BEFORE UPDATE OR DELETE ON "partnership_messages" FOR EACH ROW EXECUTE FUNCTION "partnership_messages_append_only"();--> statement-breakpoint
CREATE TRIGGER "partnership_messages_no_truncate" BEFORE TRUNCATE ON "partnership_messages" FOR EACH STATEMENT EXECUTE FUNCTION "partnership_messages_append_only"();
