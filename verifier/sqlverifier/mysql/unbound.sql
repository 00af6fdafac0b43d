-- Gives the session back its wait_timeout, as bound.sql found it.
SET SESSION wait_timeout = @fencelock_wait_timeout
