import { Migration } from '@mikro-orm/migrations';

/**
 * Agenda's table, as @agendajs/postgres-backend 3.0.6 makes it. The backend used to create and update
 * it at every process's boot (its `ensureSchema`): `ALTER TABLE … ADD COLUMN IF NOT EXISTS` and
 * DROP/CREATE TRIGGER take an ACCESS EXCLUSIVE lock before looking, with no lock_timeout, so a boot
 * behind a long transaction on agenda_jobs stalled, and every job query of the running workers queued
 * behind it. Here it runs with the other migrations: under their lock_timeout and retries, and once.
 * A database made by an earlier release already has the table: every statement leaves it as it is.
 * A backend upgrade that changes the table needs a migration of its own
 * (test/deploy/migration-locks.test.ts compares the table with the installed backend's).
 */
export class Migration20261127001001_agenda_jobs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE IF NOT EXISTS agenda_jobs (
      id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
      name VARCHAR(255) NOT NULL,
      priority INTEGER NOT NULL DEFAULT 0,
      next_run_at TIMESTAMPTZ,
      type VARCHAR(10) NOT NULL DEFAULT 'normal' CHECK (type IN ('normal', 'single')),
      locked_at TIMESTAMPTZ,
      last_finished_at TIMESTAMPTZ,
      failed_at TIMESTAMPTZ,
      fail_count INTEGER DEFAULT NULL,
      fail_reason TEXT,
      repeat_timezone VARCHAR(100),
      last_run_at TIMESTAMPTZ,
      repeat_interval VARCHAR(255),
      data JSONB DEFAULT '{}'::jsonb,
      repeat_at VARCHAR(255),
      disabled BOOLEAN DEFAULT FALSE,
      progress REAL,
      fork BOOLEAN DEFAULT FALSE,
      last_modified_by VARCHAR(255),
      debounce_started_at TIMESTAMPTZ,
      start_date TIMESTAMPTZ,
      end_date TIMESTAMPTZ,
      skip_days JSONB,
      created_at TIMESTAMPTZ DEFAULT NOW(),
      updated_at TIMESTAMPTZ DEFAULT NOW()
    );`);
    // Columns an older backend's table lacks.
    this.addSql('ALTER TABLE agenda_jobs ADD COLUMN IF NOT EXISTS start_date TIMESTAMPTZ, ADD COLUMN IF NOT EXISTS end_date TIMESTAMPTZ, ADD COLUMN IF NOT EXISTS skip_days JSONB;');
    this.addSql(`CREATE INDEX IF NOT EXISTS agenda_jobs_find_and_lock_idx ON agenda_jobs (name, next_run_at, priority DESC, locked_at, disabled) WHERE disabled = FALSE;`);
    this.addSql(`CREATE UNIQUE INDEX IF NOT EXISTS agenda_jobs_single_job_idx ON agenda_jobs (name) WHERE type = 'single';`);
    this.addSql('CREATE INDEX IF NOT EXISTS agenda_jobs_locked_at_idx ON agenda_jobs (locked_at) WHERE locked_at IS NOT NULL;');
    this.addSql('CREATE INDEX IF NOT EXISTS agenda_jobs_next_run_at_idx ON agenda_jobs (next_run_at) WHERE next_run_at IS NOT NULL;');
    this.addSql(`CREATE OR REPLACE FUNCTION update_agenda_jobs_updated_at() RETURNS TRIGGER AS $$
      BEGIN
        NEW.updated_at = NOW();
        RETURN NEW;
      END;
      $$ LANGUAGE plpgsql;`);
    this.addSql('DROP TRIGGER IF EXISTS agenda_jobs_updated_at_trigger ON agenda_jobs;');
    this.addSql('CREATE TRIGGER agenda_jobs_updated_at_trigger BEFORE UPDATE ON agenda_jobs FOR EACH ROW EXECUTE FUNCTION update_agenda_jobs_updated_at();');
  }

  /**
   * Keeps the table: it holds the scheduled jobs (webhook retries among them), and the releases before
   * this one create it themselves as they connect.
   */
  override async down(): Promise<void> {}
}
