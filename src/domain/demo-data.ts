/**
 * A deterministic demo data set for every resource: one consortium of three universities plus
 * an independent college, with students spread over the consortium. The same seed and size
 * always give the same ids and values (ids and choices are hashes of the seed and a row number).
 * Built set-based in SQL, so 100,000 students load in seconds. Tokens for it are issued by
 * src/domain/demo.ts. Every set-based insert into a tenant table reads its university from
 * `tenants` (aliased `t`) and writes `t.university_id`: on Citus such an insert runs on each
 * shard by itself, where an insert from generate_series alone would be copied in through the
 * coordinator with COPY, which row-level security refuses.
 */
import { INTAKE_TERMS, STUDY_MODES } from '../resources/write-shapes.ts';
import type { Queryable } from '../db/store.ts';


export const DEMO_DEFAULTS = { students: 300, seed: 42 } as const;
export const DEMO_MAX_STUDENTS = 200_000;

/**
 * A deterministic uuid from the md5 of a text: RFC 9562's version 8 (custom) and its variant, so
 * that strict validators take it (zod 4's `z.uuid()` refused md5's bare hex, so every demo row).
 */
const uuidFromMd5 = (text: string) => `overlay(overlay(md5(${text}) placing '8' from 13) placing '8' from 17)::uuid`;

/** A deterministic uuid and a deterministic integer in [0, 2^28) from a text key. */
const uuidOf = (key: string) => uuidFromMd5(`$1::text || ':' || ${key}`);

/**
 * An organisation's id as data sets loaded before the ids were RFC 9562's hold it (md5's bare
 * hex): such a set is found by it, not loaded a second time beside it.
 */
const earlierUuidOf = (key: string) => `md5($1::text || ':' || ${key})::uuid`;
const pick = (key: string) => `(('x' || substr(md5($1::text || ':' || ${key}), 1, 7))::bit(28)::integer)`;

const FIRST_NAMES = ['Ava', 'Liam', 'Noah', 'Emma', 'Olivia', 'Mateo', 'Amara', 'Kenji', 'Priya', 'Sofia', 'Lucas', 'Zara',
  'Ethan', 'Maya', 'Omar', 'Chloe', 'Ivan', 'Leila', 'Diego', 'Hana', 'Samuel', 'Aisha', 'Felix', 'Nora', 'Ravi', 'Elena'];
const LAST_NAMES = ['Smith', 'Nguyen', 'Garcia', 'Okafor', 'Muller', 'Rossi', 'Kim', 'Patel', 'Johansson', 'Silva', 'Haddad',
  'Kowalski', 'Tanaka', 'Brown', 'Dubois', 'Novak', 'Mensah', 'Costa', 'Ahmed', 'Walsh', 'Ivanova', 'Moreau', 'Lopez', 'Chen'];
const PROGRAMS = [['Computer Science', 'BSc'], ['Business Administration', 'MBA'], ['Mechanical Engineering', 'BEng'],
  ['Data Science', 'MSc'], ['Nursing', 'BSN'], ['Economics', 'BA'], ['Psychology', 'BA'], ['Public Health', 'MPH']];
const SKILLS = ['Python', 'SQL', 'Excel', 'Project management', 'Public speaking', 'React', 'Statistics', 'CAD', 'Research',
  'Negotiation', 'Customer service', 'Java', 'Tableau', 'Clinical practice', 'Copywriting', 'Machine learning'];
const INDUSTRIES = ['Software', 'Finance', 'Healthcare', 'Manufacturing', 'Consulting', 'Education', 'Retail', 'Energy'];
const SENTENCES = [
  'Led a cross-functional team of five to deliver a customer analytics dashboard two weeks ahead of schedule.',
  'Designed and ran A/B experiments that lifted sign-up conversion by 12 percent across three markets.',
  'Automated the monthly reporting pipeline with Python and SQL, cutting preparation time from two days to one hour.',
  'Mentored first-year students in the peer tutoring programme and organised weekly study sessions.',
  'Presented research findings on supply-chain resilience at the regional undergraduate conference.',
  'Coordinated volunteer schedules for a community health fair serving more than 400 residents.',
  'Built a prototype mobile application for campus event discovery used by 1,200 students in its first term.',
  'Analysed clinical placement data to identify scheduling bottlenecks and proposed a revised rota.',
];

const arr = (values: readonly string[]) => `ARRAY[${values.map((v) => `'${v.replace(/'/g, "''")}'`).join(',')}]`;
const pickFrom = (values: readonly string[], key: string) => `(${arr(values)})[1 + ${pick(key)} % ${values.length}]`;
/** Roughly `sentences` sentences of résumé-like prose. */
const prose = (key: string, sentences: number) =>
  `(select string_agg(${pickFrom(SENTENCES, `${key} || ':' || k`)}, ' ') from generate_series(1, ${sentences}) k)`;

const UNIVERSITIES = [
  { key: 'u1', name: 'Northfield University', short: 'northfield', country: 'GB', timezone: 'Europe/London', member: true },
  { key: 'u2', name: 'Riverside Institute of Technology', short: 'riverside', country: 'US', timezone: 'America/Chicago', member: true },
  { key: 'u3', name: 'Hillcrest College', short: 'hillcrest', country: 'IE', timezone: 'Europe/Dublin', member: true },
  { key: 'u4', name: 'Lakeside School of Design', short: 'lakeside', country: 'CA', timezone: 'America/Toronto', member: false },
] as const;
const MEMBERS = UNIVERSITIES.filter((u) => u.member).length;
const COHORTS_PER_UNIVERSITY = 8;
const INDEPENDENT_STUDENTS = 40;
const SELF_SERVE_ACCOUNTS = 5;
/** Student number i was created i minutes after this. */
const STUDENT_CREATED_FROM = `timestamptz '2024-01-01 00:00:00+00'`;

// Universities are numbered 0..3 in the order above; u(n) is the id of number n, and t is its
// row of tenants.
const u = (n: string) => uuidFromMd5(`$1::text || ':u' || ((${n}) + 1)`);
const short = (n: string) => `(${arr(UNIVERSITIES.map((x) => x.short))})[(${n}) + 1]`;
const TENANT = 't.university_id';
const universities = `generate_series(0, ${UNIVERSITIES.length - 1}) un join tenants t on ${TENANT} = ${u('un')}`;
// Students 1..N over the consortium's members; INDEPENDENT_STUDENTS more at the independent college.
const studentRows = `(select i, case when i > $2::int then ${MEMBERS} else (i - 1) % ${MEMBERS} end as un
    from generate_series(1, $2::int + ${INDEPENDENT_STUDENTS}) i) st join tenants t on ${TENANT} = ${u('st.un')}`;
const student = (i: string) => uuidOf(`'student:' || ${i}`);
const first = pickFrom(FIRST_NAMES, `'first:' || i`);
const last = pickFrom(LAST_NAMES, `'last:' || i`);

/** Runs one statement of the data set; `$1` is the seed and `$2` the number of students. */
type Run = (text: string) => Promise<unknown>;

export async function demoExists(tx: Queryable, seed: number = DEMO_DEFAULTS.seed): Promise<boolean> {
  const rows = await tx.query(`select 1 from consortia where id in (${uuidOf(`'consortium'`)}, ${earlierUuidOf(`'consortium'`)})`, [String(seed)]);
  return rows.length > 0;
}

export interface DemoOrganisations {
  readonly consortium: { id: string; name: string };
  /** In data-set order: the three consortium members, then the independent college. */
  readonly universities: readonly { id: string; name: string; short_name: string }[];
}

export async function demoOrganisations(tx: Queryable, seed: number = DEMO_DEFAULTS.seed): Promise<DemoOrganisations> {
  const [consortium] = await tx.query<{ id: string; name: string }>(
    `select id, name from consortia where id in (${uuidOf(`'consortium'`)}, ${earlierUuidOf(`'consortium'`)})`, [String(seed)]);
  const universities = await tx.query<{ id: string; name: string; short_name: string }>(
    `select u.id, u.name, u.short_name
     from unnest(array[${UNIVERSITIES.map((x) => uuidOf(`'${x.key}'`)).join(', ')}],
                 array[${UNIVERSITIES.map((x) => earlierUuidOf(`'${x.key}'`)).join(', ')}]) with ordinality as k(id, earlier_id, n)
     join universities u on u.id in (k.id, k.earlier_id) order by k.n`, [String(seed)]);
  return { consortium, universities };
}

/** The consortium, the universities, their campuses, résumé templates and cohorts. */
async function insertOrganisations(run: Run): Promise<void> {
  await run(`insert into consortia (id, name) values (${uuidOf(`'consortium'`)}, 'Northern Universities Consortium')`);
  // Another seed's data set marks its universities' names and short names as its own.
  const ofSeed = (text: string, mark: string) => `'${text}' || case when $1::int = ${DEMO_DEFAULTS.seed} then '' else ${mark} end`;
  for (const u of UNIVERSITIES) {
    await run(`insert into universities (id, name, short_name, consortium_id, country, timezone)
      values (${uuidOf(`'${u.key}'`)}, ${ofSeed(u.name, `' (seed ' || $1 || ')'`)}, ${ofSeed(u.short, `'-' || $1`)},
        ${u.member ? uuidOf(`'consortium'`) : 'null'}, '${u.country}', '${u.timezone}')`);
  }
  await run(`insert into tenants (university_id) values ${UNIVERSITIES.map((x) => `(${uuidOf(`'${x.key}'`)})`).join(', ')}`);

  await run(`insert into campuses (id, university_id, name, city, country)
    select ${uuidOf(`'campus:' || un || ':' || c`)}, ${TENANT}, (ARRAY['Main Campus','City Campus'])[c],
      (ARRAY['Northfield','Riverside','Hillcrest','Lakeside'])[un + 1], (ARRAY['GB','US','IE','CA'])[un + 1]
    from ${universities}, generate_series(1, 2) c`);
  await run(`insert into resume_templates (id, university_id, name)
    select ${uuidOf(`'template:' || un || ':' || tp`)}, ${TENANT}, (ARRAY['Classic','Modern','Academic CV'])[tp]
    from ${universities}, generate_series(1, 3) tp`);
  // Cohorts: intakes from 2019 to 2026, so the older ones have ended and their students are alumni.
  await run(`insert into cohorts (id, university_id, name, display_name, program, degree, start_date, end_date,
      intake_year, intake_term, campus_id, study_mode, resume_template_names)
    select ${uuidOf(`'cohort:' || un || ':' || c`)}, ${TENANT},
      lower(replace(pr.program, ' ', '-')) || '-' || (2018 + c), pr.program || ' ' || (2018 + c) || ' intake',
      pr.program, pr.degree, make_date(2018 + c, 9, 1), make_date(2018 + c + pr.years, 6, 30),
      2018 + c, '${INTAKE_TERMS[0]}', ${uuidOf(`'campus:' || un || ':' || (1 + c % 2)`)},
      (${arr(STUDY_MODES)})[1 + c % ${STUDY_MODES.length}], ARRAY['Classic','Modern']
    from ${universities}, generate_series(1, ${COHORTS_PER_UNIVERSITY}) c,
      lateral (select (${arr(PROGRAMS.map((x) => x[0]))})[1 + (un * 3 + c) % ${PROGRAMS.length}] as program,
                      (${arr(PROGRAMS.map((x) => x[1]))})[1 + (un * 3 + c) % ${PROGRAMS.length}] as degree,
                      case when c % 3 = 0 then 2 else 3 end as years) pr`);
}

/** Student accounts and students, their alumni history, and staff and self-serve accounts. */
async function insertPeople(run: Run): Promise<void> {
  await run(`insert into accounts (id, kind, university_id, email)
    select ${student('i')}, 'student', ${TENANT},
      lower(${first} || '.' || ${last} || '.' || i || '@' || ${short('un')} || '-' || $1::text || '.example.edu')
    from ${studentRows}`);
  await run(`insert into students (id, university_id, cohort_id, email, first_name, last_name, external_id, phone,
      graduation_date, is_alumni, account_status, created_at, updated_at)
    select s.id, s.university_id, s.cohort_id, a.email, s.first_name, s.last_name, s.external_id, s.phone,
      s.graduation_date, coalesce(s.graduation_date, c.end_date) < current_date, s.account_status, s.created_at, s.created_at
    from (select ${student('i')} as id, ${TENANT} as university_id,
            ${uuidOf(`'cohort:' || un || ':' || (1 + ${pick(`'cohort:' || i`)} % ${COHORTS_PER_UNIVERSITY})`)} as cohort_id,
            ${first} as first_name, ${last} as last_name,
            upper(${short('un')}) || '-' || lpad(i::text, 7, '0') as external_id,
            case when ${pick(`'phone:' || i`)} % 4 = 0 then null else '+44' || (7000000000 + ${pick(`'phone:' || i`)} % 999999999) end as phone,
            case when ${pick(`'grad:' || i`)} % 3 = 0 then null
                 else make_date(2021 + ${pick(`'grad:' || i`)} % 5, 6, 20) end as graduation_date,
            case when ${pick(`'claim:' || i`)} % 10 < 3 then 'claimed' else 'invited' end as account_status,
            ${STUDENT_CREATED_FROM} + (i || ' minutes')::interval as created_at
          from ${studentRows}) s
    join accounts a on a.university_id = s.university_id and a.id = s.id
    join cohorts c on c.university_id = s.university_id and c.id = s.cohort_id`);
  // Each entry's id is given (minus the student's number), so that Citus runs the insert on the
  // shards: an identity the insert draws itself is drawn on the coordinator, through COPY. Below
  // zero, the ids never meet the identity's own and sort before every later entry.
  await run(`insert into alumni_flag_history (id, university_id, student_id, is_alumni, reason, created_at) overriding system value
    select -(extract(epoch from created_at - ${STUDENT_CREATED_FROM}) / 60)::bigint, university_id, id, is_alumni, 'cohort_enrolment', created_at
    from students
    where university_id = any(array[${UNIVERSITIES.map((x) => uuidOf(`'${x.key}'`)).join(', ')}])`);
  await run(`insert into accounts (id, kind, university_id, email)
    select ${uuidOf(`'staff:' || un || ':' || k`)}, 'staff', ${TENANT},
      'advisor' || k || '@' || ${short('un')} || '-' || $1::text || '.example.edu'
    from ${universities}, generate_series(1, 5) k`);
  // Self-serve accounts are their own tenants (migration 004): one VALUES row each.
  await run(`insert into accounts (id, kind, university_id, email) values ${Array.from({ length: SELF_SERVE_ACCOUNTS }, (_, n) => {
    const id = uuidOf(`'selfserve:${n + 1}'`);
    return `(${id}, 'self_serve', ${id}, 'jobseeker${n + 1}@mail-' || $1::text || '.example.com')`;
  }).join(', ')}`);
  // Every address the data set holds, in the register (src/domain/email-register.ts).
  await run(`insert into email_register (email_hash, kind, university_id)
    select encode(sha256(convert_to(email, 'UTF8')), 'hex'), kind, nullif(university_id, id) from accounts
    where email like '%-' || $1::text || '.example.%'
    on conflict do nothing`);
}

/** Advisor assignments, résumés and profiles. */
async function insertStudentRecords(run: Run): Promise<void> {
  await run(`insert into advisor_students (id, university_id, student_id, advisor_id, advisor_email, advisor_name, co_advisor_ids, assigned_at)
    select ${uuidOf(`'advising:' || i`)}, ${TENANT}, ${student('i')}, ${uuidOf(`'staff:' || un || ':' || (1 + i % 5)`)},
      'advisor' || (1 + i % 5) || '@' || ${short('un')} || '-' || $1::text || '.example.edu',
      ${pickFrom(FIRST_NAMES, `'advisor:' || (1 + i % 5)`)} || ' ' || ${pickFrom(LAST_NAMES, `'advisor-last:' || (1 + i % 5)`)},
      case when i % 4 = 1 then ARRAY[${uuidOf(`'staff:' || un || ':' || (1 + (i + 1) % 5)`)}] else '{}'::uuid[] end,
      timestamptz '2024-02-01 00:00:00+00' + (i || ' minutes')::interval
    from ${studentRows} where i % 2 = 1`);
  // Résumés of 2–4 KB for every other student, like real ones.
  await run(`insert into resumes (id, university_id, student_id, title, template_name, content, is_primary, created_at, updated_at)
    select ${uuidOf(`'resume:' || i`)}, ${TENANT}, ${student('i')},
      ${first} || ' ' || ${last} || ' — résumé', (ARRAY['Classic','Modern','Academic CV'])[1 + i % 3],
      upper(${first} || ' ' || ${last}) || E'\\n\\nEXPERIENCE\\n' || ${prose(`'resume:' || i`, 22)}
        || E'\\n\\nPROJECTS\\n' || ${prose(`'project:' || i`, 10)} || E'\\n\\nSKILLS\\n'
        || array_to_string(ARRAY[${pickFrom(SKILLS, `'s1:' || i`)}, ${pickFrom(SKILLS, `'s2:' || i`)}, ${pickFrom(SKILLS, `'s3:' || i`)}], ', '),
      true, timestamptz '2024-03-01 00:00:00+00' + (i || ' minutes')::interval,
      timestamptz '2024-03-01 00:00:00+00' + (i || ' minutes')::interval
    from ${studentRows} where i % 2 = 0`);
  await run(`insert into student_profiles (id, university_id, student_id, headline, summary, skills, sections, visibility, updated_at)
    select ${uuidOf(`'profile:' || i`)}, ${TENANT}, ${student('i')},
      'Aspiring ' || lower(${pickFrom(INDUSTRIES, `'industry:' || i`)}) || ' professional',
      ${prose(`'summary:' || i`, 2)},
      ARRAY[${pickFrom(SKILLS, `'s1:' || i`)}, ${pickFrom(SKILLS, `'s2:' || i`)}],
      jsonb_build_array(
        jsonb_build_object('type', 'experience', 'title', 'Experience', 'items',
          (select jsonb_agg(jsonb_build_object('role', 'Intern', 'organisation', ${pickFrom(INDUSTRIES, `'org:' || i || ':' || k`)} || ' Ltd',
             'description', ${pickFrom(SENTENCES, `'exp:' || i || ':' || k`)})) from generate_series(1, 3) k)),
        jsonb_build_object('type', 'education', 'title', 'Education', 'items',
          jsonb_build_array(jsonb_build_object('institution', ${short('un')}, 'award', 'Degree'))),
        jsonb_build_object('type', 'interests', 'title', 'Interests', 'items', jsonb_build_array('Hiking', 'Chess', 'Volunteering'))),
      (ARRAY['university','employers','private'])[1 + i % 3],
      timestamptz '2024-04-01 00:00:00+00' + (i || ' minutes')::interval
    from ${studentRows} where i % 2 = 1`);
}

/** Onboarding progress and engagement, in total and per month. */
async function insertActivity(run: Run): Promise<void> {
  await run(`insert into onboarding (id, university_id, student_id, status, steps_completed, steps_total, completed_at, updated_at)
    select ${uuidOf(`'onboarding:' || i`)}, ${TENANT}, ${student('i')},
      (ARRAY['not_started','in_progress','completed'])[1 + ${pick(`'onb:' || i`)} % 3],
      (ARRAY[0, 3, 6])[1 + ${pick(`'onb:' || i`)} % 3], 6,
      case when ${pick(`'onb:' || i`)} % 3 = 2 then timestamptz '2024-05-01 00:00:00+00' + (i || ' minutes')::interval end,
      timestamptz '2024-05-01 00:00:00+00' + (i || ' minutes')::interval
    from ${studentRows}`);
  await run(`insert into student_engagement (id, university_id, student_id, last_active_at, logins_30d, applications_total,
      events_attended_total, appointments_total, resume_count, profile_completeness, updated_at)
    select ${uuidOf(`'engagement:' || i`)}, ${TENANT}, ${student('i')},
      timestamptz '2026-10-01 00:00:00+00' + ((${pick(`'active:' || i`)} % 50000) || ' minutes')::interval,
      ${pick(`'logins:' || i`)} % 30, ${pick(`'apps:' || i`)} % 25, ${pick(`'events:' || i`)} % 12,
      ${pick(`'appts:' || i`)} % 8, case when i % 2 = 0 then 1 else 0 end, ${pick(`'complete:' || i`)} % 101,
      timestamptz '2026-11-01 00:00:00+00'
    from ${studentRows}`);
  await run(`insert into student_engagement_monthly (id, university_id, student_id, month, logins, applications, events_attended, appointments)
    select ${uuidOf(`'monthly:' || i || ':' || m`)}, ${TENANT}, ${student('i')}, make_date(2026, m, 1),
      ${pick(`'ml:' || i || ':' || m`)} % 20, ${pick(`'ma:' || i || ':' || m`)} % 6,
      ${pick(`'me:' || i || ':' || m`)} % 4, ${pick(`'mp:' || i || ':' || m`)} % 3
    from ${studentRows}, generate_series(8, 10) m`);
}

/** The alumni directory, companies, jobs and events. */
async function insertDirectory(run: Run): Promise<void> {
  await run(`insert into alumni (id, university_id, first_name, last_name, email, graduation_year, degree, employer, job_title,
      city, linkedin_url, open_to_mentoring, updated_at)
    select ${uuidOf(`'alumnus:' || un || ':' || k`)}, ${TENANT}, ${pickFrom(FIRST_NAMES, `'af:' || un || ':' || k`)},
      ${pickFrom(LAST_NAMES, `'al:' || un || ':' || k`)},
      'alumnus' || k || '@' || ${short('un')} || '-' || $1::text || '.example.org', 2005 + ${pick(`'ay:' || un || ':' || k`)} % 20,
      ${pickFrom(PROGRAMS.map((x) => `${x[1]} ${x[0]}`), `'ad:' || un || ':' || k`)},
      ${pickFrom(INDUSTRIES, `'ae:' || un || ':' || k`)} || ' Group', (ARRAY['Analyst','Engineer','Manager','Consultant','Director'])[1 + k % 5],
      (ARRAY['London','Chicago','Dublin','Toronto','Berlin'])[1 + k % 5],
      'https://www.linkedin.com/in/alumnus-' || un || '-' || k, k % 3 = 0, timestamptz '2025-01-01 00:00:00+00'
    from ${universities}, generate_series(1, greatest(10, $2::int / 20)) k`);
  await run(`insert into companies (id, university_id, name, industry, website, size_band, city, country, created_at)
    select ${uuidOf(`'company:' || un || ':' || k`)}, ${TENANT},
      ${pickFrom(LAST_NAMES, `'cn:' || un || ':' || k`)} || ' ' || ${pickFrom(INDUSTRIES, `'ci:' || un || ':' || k`)} || ' ' || k,
      ${pickFrom(INDUSTRIES, `'ci:' || un || ':' || k`)}, 'https://company' || k || '.example.com',
      (ARRAY['1-10','11-50','51-200','201-1000','1000+'])[1 + k % 5], (ARRAY['London','Chicago','Dublin','Toronto'])[un + 1],
      (ARRAY['GB','US','IE','CA'])[un + 1], timestamptz '2024-01-15 00:00:00+00'
    from ${universities}, generate_series(1, 20) k`);
  await run(`insert into jobs (id, university_id, company_id, title, description, location, employment_type, remote,
      salary_min, salary_max, posted_at, expires_at)
    select ${uuidOf(`'job:' || un || ':' || k`)}, ${TENANT}, ${uuidOf(`'company:' || un || ':' || (1 + k % 20)`)},
      (ARRAY['Graduate Analyst','Junior Developer','Marketing Assistant','Research Intern','Staff Nurse','Data Engineer'])[1 + k % 6],
      ${prose(`'job:' || un || ':' || k`, 10)}, (ARRAY['London','Chicago','Dublin','Toronto'])[un + 1],
      (ARRAY['full_time','part_time','internship','contract'])[1 + k % 4], k % 3 = 0,
      25000 + (${pick(`'sal:' || un || ':' || k`)} % 20) * 1000, 45000 + (${pick(`'sal:' || un || ':' || k`)} % 20) * 1500,
      timestamptz '2026-09-01 00:00:00+00' + (k || ' hours')::interval, timestamptz '2027-01-31 00:00:00+00'
    from ${universities}, generate_series(1, 50) k`);
  await run(`insert into events (id, university_id, campus_id, title, kind, starts_at, ends_at, location, capacity,
      registrations_count, created_at)
    select ${uuidOf(`'event:' || un || ':' || k`)}, ${TENANT}, ${uuidOf(`'campus:' || un || ':' || (1 + k % 2)`)},
      (ARRAY['Careers Fair','CV Clinic','Employer Talk','Mock Interviews','Alumni Networking Evening'])[1 + k % 5],
      (ARRAY['fair','workshop','talk','workshop','networking'])[1 + k % 5],
      timestamptz '2026-09-15 17:00:00+00' + (k * 3 || ' days')::interval,
      timestamptz '2026-09-15 19:00:00+00' + (k * 3 || ' days')::interval,
      (ARRAY['Great Hall','Room 101','Online','Library Atrium'])[1 + k % 4], 50 + (k % 5) * 50,
      ${pick(`'reg:' || un || ':' || k`)} % 50, timestamptz '2026-08-01 00:00:00+00'
    from ${universities}, generate_series(1, 30) k`);
}

/** The demo data set, without tokens. */
export async function loadDemoData(tx: Queryable, options: { students?: number; seed?: number } = {}): Promise<{ students: number; seed: number }> {
  const students = options.students ?? DEMO_DEFAULTS.students;
  const seed = options.seed ?? DEMO_DEFAULTS.seed;
  // A statement is sent only the parameters it names.
  const run: Run = (text) => tx.query(text, text.includes('$2') ? [String(seed), String(students)] : [String(seed)]);
  for (const insert of [insertOrganisations, insertPeople, insertStudentRecords, insertActivity, insertDirectory]) await insert(run);
  await tx.exec('analyze');
  return { students, seed };
}
