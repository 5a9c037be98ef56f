-- Shipped: never edit, add a new numbered file instead.
-- +goose Up
-- occurred_at is Unix microseconds (UTC): integers compare and index faster than text times.
CREATE TABLE records (
    id            TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
    occurred_at   INTEGER NOT NULL,
    team          TEXT    NOT NULL DEFAULT '',
    application   TEXT    NOT NULL DEFAULT '',
    api_group     TEXT    NOT NULL DEFAULT '',
    kind          TEXT    NOT NULL DEFAULT '',
    namespace     TEXT    NOT NULL DEFAULT '',
    name          TEXT    NOT NULL DEFAULT '',
    cluster       TEXT    NOT NULL DEFAULT '',
    from_revision INTEGER NOT NULL DEFAULT 0,
    to_revision   INTEGER NOT NULL DEFAULT 0,
    images        TEXT    NOT NULL DEFAULT '[]', -- JSON array of strings
    git_commit    TEXT    NOT NULL DEFAULT '',
    cause         TEXT    NOT NULL DEFAULT '',
    cause_detail  TEXT    NOT NULL DEFAULT '',
    actor         TEXT    NOT NULL DEFAULT '',
    outcome       TEXT    NOT NULL DEFAULT '',
    message       TEXT    NOT NULL DEFAULT ''
) STRICT;

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
