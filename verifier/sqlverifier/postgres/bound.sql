-- Bounds the transaction it runs in: the server closes the session when
-- it idles in it, or runs one statement, longer than $1 ms. Local: the
-- settings end with the transaction.
SELECT set_config('idle_in_transaction_session_timeout', $1, true), set_config('statement_timeout', $1, true)
