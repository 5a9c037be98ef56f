-- Shipped: never edit, add a new numbered file instead.
-- +goose Up
CREATE TABLE records (
    -- "C" collation: byte order, the same tie-break order as SQLite.
    id            text COLLATE "C" NOT NULL PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 128),
    occurred_at   timestamptz NOT NULL,
    team          text   NOT NULL DEFAULT '',
    application   text   NOT NULL DEFAULT '',
    api_group     text   NOT NULL DEFAULT '',
    kind          text   NOT NULL DEFAULT '',
    namespace     text   NOT NULL DEFAULT '',
    name          text   NOT NULL DEFAULT '',
    cluster       text   NOT NULL DEFAULT '',
    from_revision bigint NOT NULL DEFAULT 0,
    to_revision   bigint NOT NULL DEFAULT 0,
    images        jsonb  NOT NULL DEFAULT '[]', -- array of strings; jsonb so it can be GIN-indexed later
    git_commit    text   NOT NULL DEFAULT '',
    cause         text   NOT NULL DEFAULT '',
    cause_detail  text   NOT NULL DEFAULT '',
    actor         text   NOT NULL DEFAULT '',
    outcome       text   NOT NULL DEFAULT '',
    message       text   NOT NULL DEFAULT ''
);

-- Every index ends in (occurred_at DESC, id DESC), the page order, so a filtered page is a
-- range scan that stops after limit+1 rows.
CREATE INDEX records_time ON records (occurred_at DESC, id DESC);
-- Team is the control-plane namespace: the Team filter and the Namespaces scope.
CREATE INDEX records_team_time ON records (team, occurred_at DESC, id DESC);
CREATE INDEX records_application_time ON records (application, occurred_at DESC, id DESC);
CREATE INDEX records_cluster_time ON records (cluster, occurred_at DESC, id DESC);
-- Latest partitions by (template, cluster); name leads so a Name filter can use it too.
CREATE INDEX records_template_time ON records (name, kind, namespace, api_group, cluster, occurred_at DESC, id DESC);

-- +goose Down
DROP TABLE records;
