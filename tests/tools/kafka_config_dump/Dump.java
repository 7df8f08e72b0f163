import java.util.*;
import org.apache.kafka.common.config.ConfigDef;
public class Dump {
  static String esc(String s){ if(s==null) return "null"; StringBuilder b=new StringBuilder("\""); for(char c: s.toCharArray()){ if(c=='"'||c=='\\') b.append('\\').append(c); else if(c=='\n') b.append("\\n"); else if(c<0x20) b.append(String.format("\\u%04x",(int)c)); else b.append(c);} return b.append('"').toString(); }
  public static void main(String[] a) throws Exception {
    Class<?> kc = Class.forName("kafka.server.KafkaConfig$");
    Object mod = kc.getField("MODULE$").get(null);
    ConfigDef def = (ConfigDef) kc.getMethod("configDef").invoke(mod);
    Class<?> dc = Class.forName("kafka.server.DynamicBrokerConfig$");
    Object dmod = dc.getField("MODULE$").get(null);
    Object all = dc.getMethod("AllDynamicConfigs").invoke(dmod);
    scala.collection.Iterable<?> it = (scala.collection.Iterable<?>) all;
    Set<String> dyn = new TreeSet<>(); scala.collection.Iterator<?> i = it.iterator(); while(i.hasNext()) dyn.add((String)i.next());
    StringBuilder out = new StringBuilder("{\"dynamic\": [");
    boolean first=true; for(String s: dyn){ if(!first) out.append(","); first=false; out.append(esc(s)); }
    out.append("], \"configs\": {");
    first=true;
    for (Map.Entry<String, ConfigDef.ConfigKey> e : def.configKeys().entrySet()) {
      ConfigDef.ConfigKey k = e.getValue();
      if(!first) out.append(",\n"); first=false;
      String dflt = k.hasDefault() ? (k.defaultValue==null? null : ConfigDef.convertToString(k.defaultValue, k.type)) : null;
      out.append(esc(k.name)).append(": {\"type\": ").append(esc(k.type.name())).append(", \"has_default\": ").append(k.hasDefault())
         .append(", \"default\": ").append(esc(dflt)).append(", \"doc\": ").append(esc(k.documentation))
         .append(", \"validator\": ").append(esc(k.validator==null?null:k.validator.toString())).append(", \"internal\": ").append(k.internalConfig).append("}");
    }
    out.append("}}");
    System.out.println(out);
  }
}
