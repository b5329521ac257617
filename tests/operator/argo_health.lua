-- Runs an Argo CD resource health script the way Argo CD does: the resource, decoded from
-- JSON into plain Lua tables (JSON null becomes nil, as Argo's Go-to-Lua conversion does),
-- is the global `obj`; the script returns a table whose `status` must be one of Argo's
-- health codes. Argo CD embeds gopher-lua, a Lua 5.1 implementation: run this with lua5.1.
-- Usage: lua5.1 argo_health.lua SCRIPT-FILE < OBJECT.json; prints "STATUS<TAB>MESSAGE".
local cjson = require("cjson")

local function plain(v)
  if v == cjson.null then
    return nil
  end
  if type(v) == "table" then
    for k, x in pairs(v) do
      v[k] = plain(x)
    end
  end
  return v
end

local path = assert(arg[1], "usage: argo_health.lua SCRIPT-FILE < OBJECT.json")
local f = assert(io.open(path, "r"))
local script = f:read("*a")
f:close()

obj = plain(cjson.decode(io.read("*a")))
local chunk = assert(loadstring(script, "health.lua"))
local ok, hs = pcall(chunk)
if not ok then
  io.stderr:write("health script failed: " .. tostring(hs) .. "\n")
  os.exit(2)
end
local codes = { Healthy = true, Progressing = true, Degraded = true, Suspended = true,
                Missing = true, Unknown = true }
if type(hs) ~= "table" or not codes[hs.status] then
  io.stderr:write("health script returned no valid status: " .. tostring(hs and hs.status) .. "\n")
  os.exit(3)
end
io.write(hs.status, "\t", tostring(hs.message or ""), "\n")
