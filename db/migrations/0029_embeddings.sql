CREATE TABLE "embeddings" (
	"model" text NOT NULL,
	"dimensions" integer NOT NULL,
	"text_sha256" text NOT NULL,
	"vector" real[] NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "embeddings_model_text_sha256_pk" PRIMARY KEY("model","text_sha256"),
	CONSTRAINT "embeddings_sha256_check" CHECK ("text_sha256" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "embeddings_dimensions_check" CHECK ("dimensions" > 0 and cardinality("vector") = "dimensions")
);
