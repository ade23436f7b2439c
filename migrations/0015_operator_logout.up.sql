-- Console logouts: for each identity that logged out of the console, the time up to which its
-- sessions are over. The console's session is a signed cookie with no store; a session issued
-- at or before its identity's logged_out_at is refused, so a copied cookie stops working at
-- logout on every instance (a logout ends every session of that identity, in every browser).
-- Keyed by name and not a column of operators: the shared admin token (admin-token) has no
-- operator row and its sessions must end too. A row outlives a removed operator harmlessly: a
-- recreated operator's rotated_at already refuses every older session.
CREATE TABLE IF NOT EXISTS console_logouts (
    name          VARCHAR(64) NOT NULL,
    logged_out_at DATETIME(6) NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
