// The binaries' command lines: parseHelp() reads a tandem binary's --help into its flags and
// defaults; splitFlags() / effectiveFlag() read a container's command and args the way the
// binary's FlagSet does; parseHostPort() / isLoopback() read listen addresses.

import path from "node:path";

// Parses a tandem binary's --help text into Map<"--flag", {takesValue, default}>. A flag's entry
// starts on a line indented by 1-4 spaces with `--name [METAVAR]`; deeper-indented lines continue
// its description (defaults often wrap: "(default\n   30000)"). `default` is the text after
// "(default " up to ";" or ")", or null when the description gives none.
export function parseHelp(text) {
  const flags = new Map();
  let current = null;
  const finish = () => {
    if (!current) return;
    const description = current.description.replace(/\s+/g, " ");
    const m = /\(default:?\s+([^;)]*)/.exec(description);
    flags.set(current.name, {
      takesValue: current.takesValue,
      default: m ? m[1].trim() : null,
    });
    current = null;
  };
  for (const line of text.split("\n")) {
    const flag = /^ {1,4}(--[A-Za-z0-9][A-Za-z0-9-]*)(?: (\S+))?(?:\s{2,}(.*))?\s*$/.exec(line);
    if (flag) {
      finish();
      current = { name: flag[1], takesValue: flag[2] !== undefined, description: flag[3] ?? "" };
    } else if (current && /^\s{5,}\S/.test(line)) {
      current.description += " " + line.trim();
    } else {
      finish();
    }
  }
  finish();
  return flags;
}

// The binary a container runs: the base name of command[0] (tandem's images set no entrypoint
// arguments), or null.
export function binaryOf(container) {
  const cmd = container.command;
  return Array.isArray(cmd) && typeof cmd[0] === "string" ? path.posix.basename(cmd[0]) : null;
}

// Everything after the binary: command[1..] then args.
export function argsOf(container) {
  return [...(container.command ?? []).slice(1), ...(container.args ?? [])].map(String);
}

// Splits args the way tandem's FlagSet does ("--name=value", "--name value", "--switch"; the last
// occurrence of a flag wins). Returns {flags: [{name, value}], problems}; problems are what the
// binary would refuse (unknown flag, positional argument, a value missing or given to a switch).
export function splitFlags(args, help) {
  const flags = [];
  const problems = [];
  for (let i = 0; i < args.length; ++i) {
    const arg = args[i];
    if (!arg.startsWith("--") || arg === "--") {
      problems.push(`unexpected argument '${arg}' (tandem binaries take only --flags)`);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg : arg.slice(0, eq);
    let value = eq < 0 ? undefined : arg.slice(eq + 1);
    const info = help?.get(name);
    if (help && !info) {
      problems.push(`unknown flag ${name} (not in the binary's --help; it would exit at start)`);
    } else if (info && !info.takesValue && value !== undefined) {
      problems.push(`${name} is a switch and takes no value, got '${arg}'`);
    } else if (info?.takesValue && value === undefined) {
      if (i + 1 >= args.length) {
        problems.push(`${name} needs a value`);
      } else {
        value = args[++i];
      }
    }
    flags.push({ name, value });
  }
  return { flags, problems };
}

// The value a container's binary uses for `flag`: {value, source: "args"} when the container's
// args set it (last occurrence), else {value: default, source: "default"}, or undefined when the
// binary has no such flag.
export function effectiveFlag(container, flag, help) {
  const given = splitFlags(argsOf(container), help).flags.filter((f) => f.name === flag);
  if (given.length) return { value: given[given.length - 1].value ?? "", source: "args" };
  if (!help?.has(flag)) return undefined;
  return { value: help.get(flag).default, source: "default" };
}

// The value the container's args give `flag` (the last occurrence; "" for a switch), or undefined
// when they do not give it (whatever the binary's default). With the binary's parsed --help,
// "--flag value" is read too; without, only "--flag=value".
export function givenFlag(container, flag, help = null) {
  const given = splitFlags(argsOf(container), help).flags.filter((f) => f.name === flag);
  return given.length ? (given[given.length - 1].value ?? "") : undefined;
}

// "HOST:PORT" (HOST may be empty or a [bracketed] IPv6 address) -> {host, port}, else null.
export function parseHostPort(text) {
  const m = /^(\[[^\]]*\]|[^:[\]]*):(\d+)$/.exec(String(text ?? ""));
  return m ? { host: m[1], port: Number(m[2]) } : null;
}

// Whether a listen address's host is a loopback address.
export function isLoopback(host) {
  return host === "localhost" || host === "[::1]" || /^127\./.test(host);
}
