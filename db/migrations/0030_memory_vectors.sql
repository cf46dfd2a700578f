CREATE TABLE "memory_vectors" (
	"agent_id" text NOT NULL,
	"kind" text NOT NULL,
	"row_id" bigint NOT NULL,
	"model" text NOT NULL,
	"dimensions" integer NOT NULL,
	"text_sha256" text NOT NULL,
	"scale" real NOT NULL,
	"q" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "memory_vectors_agent_id_kind_row_id_model_pk" PRIMARY KEY("agent_id","kind","row_id","model"),
	CONSTRAINT "memory_vectors_kind_check" CHECK ("kind" in ('diary', 'note', 'reply', 'concept', 'abstract')),
	CONSTRAINT "memory_vectors_q_check" CHECK (length("q") = "dimensions")
);
--> statement-breakpoint
ALTER TABLE "concepts" ADD COLUMN "access_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "concepts" ADD COLUMN "last_accessed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "links" ADD COLUMN "access_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "links" ADD COLUMN "last_accessed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "memory_vectors" ADD CONSTRAINT "memory_vectors_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "memory_vectors_model_kind_idx" ON "memory_vectors" USING btree ("model","kind");