// The seed article's Java consumer, verbatim (curly quotes made straight). The article elides a few lines;
// those are marked "elided in the article" and filled in the simplest way that runs.
import java.time.Duration;                                                 // elided in the article
import java.util.List;                                                     // elided in the article
import java.util.Properties;                                               // elided in the article
import org.apache.kafka.clients.consumer.Consumer;                         // elided in the article
import org.apache.kafka.clients.consumer.ConsumerConfig;                   // elided in the article
import org.apache.kafka.clients.consumer.ConsumerRecord;                   // elided in the article
import org.apache.kafka.clients.consumer.ConsumerRecords;                  // elided in the article
import org.apache.kafka.clients.consumer.KafkaConsumer;                    // elided in the article
import org.apache.kafka.common.serialization.StringDeserializer;           // elided in the article

public class Dashboard {                                                       // elided in the article
public static void main(String[] args) {
		String broker = "localhost:9092";                                  // the article leaves it empty
		String groupId = "abc-dashboard";
		Properties props = new Properties();
		props.setProperty(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker);
		props.setProperty(ConsumerConfig.GROUP_ID_CONFIG, groupId);
		props.setProperty(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());    // elided in the article
		props.setProperty(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());  // elided in the article

		Consumer<String, String> consumer = new KafkaConsumer<String, String>(props);
		consumer.subscribe(List.of("abc-bus-location"));                      // elided in the article
		while (true) {
			ConsumerRecords<String, String> records
				= consumer.poll(Duration.ofMillis(1000));

			for (ConsumerRecord<String, String> record : records) {
				String topic = record.topic();
				int partition = record.partition();
				String key = record.key();
				String value = record.value();
				System.out.println(String.format(                            // elided in the article
					"Topic=%s, Partition=%d, Key=%s, Value=%s",
					topic, partition, key, value));
			}                                                                  // elided in the article
		}                                                                      // elided in the article
	}                                                                          // elided in the article
}                                                                              // elided in the article
