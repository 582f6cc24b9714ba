-- The container runtime a delegate instance registered with ("podman",
-- "docker"; empty: none): only instances with one are offered container
-- tasks.
ALTER TABLE instances ADD COLUMN container_runtime TEXT NOT NULL DEFAULT '';
