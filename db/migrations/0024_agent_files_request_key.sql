ALTER TABLE "agent_files" ADD COLUMN "request_key" text;--> statement-breakpoint
ALTER TABLE "agent_files" ADD CONSTRAINT "agent_files_request_key_uq" UNIQUE("request_key");